#include "shardtrain/base/hash.hpp"

#include <cstdio>

namespace shardtrain {

std::uint64_t fnv1a64_bytes(const void* data, std::size_t bytes, std::uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint64_t fnv1a64(std::string_view data, std::uint64_t seed) {
  return fnv1a64_bytes(data.data(), data.size(), seed);
}

std::string hex64(std::uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace shardtrain
