#include "shardtrain/model/init.hpp"

#include <algorithm>
#include <cmath>

#include "shardtrain/base/hash.hpp"

namespace shardtrain {

std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c, std::array<std::uint32_t, 2> k) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t(kMul0) * c[0];
    const std::uint64_t p1 = std::uint64_t(kMul1) * c[2];
    const std::uint32_t hi0 = std::uint32_t(p0 >> 32), lo0 = std::uint32_t(p0);
    const std::uint32_t hi1 = std::uint32_t(p1 >> 32), lo1 = std::uint32_t(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

double philox_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const auto r = philox4x32({std::uint32_t(index), std::uint32_t(index >> 32), std::uint32_t(stream),
                             std::uint32_t(stream >> 32)},
                            {std::uint32_t(seed), std::uint32_t(seed >> 32)});
  // u1 in (0, 1], u2 in [0, 1): 32-bit uniforms.
  const double u1 = (double(r[0]) + 1.0) / 4294967296.0;
  const double u2 = double(r[1]) / 4294967296.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void init_tensor_range(const ParameterInfo& info, std::uint64_t seed, int n_layer, std::size_t begin,
                       std::size_t count, float* out) {
  const std::uint64_t stream = fnv1a64(info.name);
  double stddev = 0.02;
  switch (info.init) {
    case InitKind::kZeros:
      for (std::size_t i = 0; i < count; ++i) out[i] = 0.0f;
      return;
    case InitKind::kOnes:
      for (std::size_t i = 0; i < count; ++i) out[i] = 1.0f;
      return;
    case InitKind::kNormalResidual:
      stddev = 0.02 / std::sqrt(2.0 * n_layer);
      break;
    case InitKind::kNormal:
      break;
  }
  for (std::size_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(stddev * philox_normal(seed, stream, begin + i));
}

void init_flat_range(const ParameterRegistry& registry, std::uint64_t seed, int n_layer, std::size_t begin,
                     std::size_t count, float* out) {
  for (std::size_t i = 0; i < count; ++i) out[i] = 0.0f;  // padding stays 0
  registry.for_each_logical_piece(begin, begin + count, [&](const ParameterInfo& t, std::size_t local,
                                                           std::size_t logical, std::size_t n) {
    init_tensor_range(t, seed, n_layer, logical, n, out + (local - begin));
  });
}

std::vector<float> init_parameters(const ParameterRegistry& registry, std::uint64_t seed, int n_layer) {
  std::vector<float> flat(registry.total());
  init_flat_range(registry, seed, n_layer, 0, flat.size(), flat.data());
  return flat;
}

}  // namespace shardtrain
