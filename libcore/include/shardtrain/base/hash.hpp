// Small, stable, non-cryptographic hashes used for identities (config hash, tensor-name keys).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace shardtrain {

// FNV-1a, 64-bit, over the bytes of `data` (continuing from `seed` when chaining).
std::uint64_t fnv1a64(std::string_view data, std::uint64_t seed = 0xcbf29ce484222325ULL);
std::uint64_t fnv1a64_bytes(const void* data, std::size_t bytes, std::uint64_t seed = 0xcbf29ce484222325ULL);
// The splitmix64 finaliser: a bijective 64-bit mixer (sampler keys and rounds, the synthetic
// source's generator, data-prep's duplicate keys). Inline: it sits in per-token/per-sample loops.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// 16 lower-case hex digits.
std::string hex64(std::uint64_t value);

}  // namespace shardtrain
