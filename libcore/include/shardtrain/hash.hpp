// Small, stable, non-cryptographic hashes used for identities (config hash, tensor-name keys).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace shardtrain {

// FNV-1a, 64-bit, over the bytes of `data` (continuing from `seed` when chaining).
std::uint64_t fnv1a64(std::string_view data, std::uint64_t seed = 0xcbf29ce484222325ULL);
std::uint64_t fnv1a64_bytes(const void* data, std::size_t bytes, std::uint64_t seed = 0xcbf29ce484222325ULL);
// 16 lower-case hex digits.
std::string hex64(std::uint64_t value);

}  // namespace shardtrain
