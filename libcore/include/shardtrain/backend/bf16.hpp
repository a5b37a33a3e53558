// bfloat16 on the host: the rounding the CUDA backend's bf16 products apply to their operands
// (__float2bfloat16_rn), written out so that CPU code can reproduce it: tests build the exact
// operands a bf16 product multiplied, and compare a device product with an fp32 product of them.
//
// bf16 is the top half of an IEEE fp32: 1 sign, 8 exponent, 7 stored mantissa bits. So it has
// fp32's range and a unit roundoff of 2^-8 (relative rounding error <= 2^-8 ~ 0.39%).
// Rounding is to nearest, ties to even (on the 16 dropped bits); infinities stay infinite; a NaN
// stays a NaN (made quiet, sign kept); values beyond the largest bf16 round to infinity, as
// IEEE rounding does.
#pragma once
#include <cstdint>
#include <cstring>

namespace shardtrain {

inline std::uint16_t float_to_bf16_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)  // NaN: keep it a NaN
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  // Round half to even: add 0x7fff plus the lowest kept bit, then truncate. A carry out of the
  // mantissa bumps the exponent, which is the correct rounding (up to infinity at the top).
  const std::uint32_t lowest_kept = (bits >> 16) & 1u;
  bits += 0x7fffu + lowest_kept;
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float bf16_bits_to_float(std::uint16_t half) {
  const std::uint32_t bits = std::uint32_t(half) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The fp32 value of `value` rounded to bf16.
inline float round_to_bf16(float value) { return bf16_bits_to_float(float_to_bf16_bits(value)); }

}  // namespace shardtrain
