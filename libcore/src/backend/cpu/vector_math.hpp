// Vectorisable scalar math for the CPU kernels. Written as plain inline functions without
// branches or library calls so that loops over arrays auto-vectorise (-O3 -march=native).
#pragma once
#include <cstdint>
#include <cstring>

namespace shardtrain::cpu {

// exp(x) for float, relative error < 2 ulp over [-87, 88] (Cephes-style: range reduction by
// ln 2 in two parts, degree-6 polynomial, exponent assembled by bit manipulation). Inputs below
// -87.3 return 0-ish denormal-free values (exp underflows to 0); above 88.7 are clamped; NaN
// gives NaN.
inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float log2e = 1.44269504088896341f;
  // Round to nearest integer without a library call: adding 1.5*2^23 forces rounding.
  const float magic = 12582912.0f;
  float n = (x * log2e + magic) - magic;
  float r = x - n * 0.693359375f;        // ln2 high part (exact in float)
  r = r - n * -2.12194440e-4f;           // ln2 low part
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // A NaN input leaves n NaN, and casting NaN to int is undefined: cast 0 instead (a select, still
  // vectorised); p is NaN already, so the result stays NaN.
  const float n_or_zero = n == n ? n : 0.0f;
  int32_t e = static_cast<int32_t>(n_or_zero) + 127;
  int32_t bits = e << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error ~1e-7, which is what GELU needs
// (it uses 1 + tanh).
inline float fast_tanh(float x) {
  float e = fast_exp(2.0f * x);
  return 1.0f - 2.0f / (e + 1.0f);
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
inline float gelu(float x) {
  float u = kGeluScale * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + fast_tanh(u));
}
// d gelu / dx
inline float gelu_grad(float x) {
  float u = kGeluScale * (x + 0.044715f * x * x * x);
  float t = fast_tanh(u);
  float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace shardtrain::cpu
