// Naive reference kernels: plain scalar loops in double precision, written from the math of each
// op in shardtrain/backend.hpp, with no blocking, no vectorisation and no shared code with any
// backend. They are the independent reference every backend's kernels are tested against
// (tests/test_kernels_*.cpp); their own backward passes are checked against central finite
// differences in tests/test_naive_kernels.cpp.
//
// Shapes follow backend.hpp: B batch, T sequence length, C channels, NH heads, hs = C / NH,
// V vocabulary, N = B*T rows, OC output channels. Every tensor is a flat row-major
// std::vector<double>. Ops documented "+=" in backend.hpp take their gradient buffers by
// reference and add to them here too; overwrite ops resize and overwrite their outputs.
//
// Also here: small helpers to move std::vectors to and from a backend's device memory
// (DeviceArray + upload/download only, never a host dereference of device memory), so the same
// tests can run against any backend.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardtrain/backend/backend.hpp"

namespace shardtrain::naive {

using Vec = std::vector<double>;

Vec to_double(const std::vector<float>& x);
std::vector<float> to_float(const Vec& x);

// ---- elementwise ----
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
double gelu(double x);
// d gelu / dx, derived by hand:
//   u = s (x + a x^3), s = sqrt(2/pi), a = 0.044715
//   gelu' = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 a x^2)
double gelu_derivative(double x);
// out (n) = gelu(in)
void gelu_forward(Vec& out, const Vec& in);
// din (n) = dout * gelu'(in)   (overwrite)
void gelu_backward(Vec& din, const Vec& in, const Vec& dout);

// ---- layer norm over the last dim (biased variance, eps = 1e-5) ----
constexpr double kLayerNormEps = 1e-5;
// out (N,C), mean (N), rstd (N) <- in (N,C), weight (C), bias (C)
void layernorm_forward(Vec& out, Vec& mean, Vec& rstd, const Vec& in, const Vec& weight,
                       const Vec& bias, std::size_t rows, std::size_t channels);
// din (N,C) +=, dweight (C) +=, dbias (C) += <- dout (N,C), in, weight, mean (N), rstd (N)
void layernorm_backward(Vec& din, Vec& dweight, Vec& dbias, const Vec& dout, const Vec& in,
                        const Vec& weight, const Vec& mean, const Vec& rstd, std::size_t rows,
                        std::size_t channels);

// ---- matrix products, weight (OC,C) ----
// out (N,OC) = in (N,C) @ weight^T + bias (OC); bias may be null
void matmul_forward(Vec& out, const Vec& in, const Vec& weight, const Vec* bias, std::size_t rows,
                    std::size_t in_channels, std::size_t out_channels);
// din (N,C) = dout (N,OC) @ weight  (overwrite; skipped when null)
// dweight (OC,C) += dout^T @ in;  dbias (OC) += column sums of dout (skipped when null)
void matmul_backward(Vec* din, Vec& dweight, Vec* dbias, const Vec& dout, const Vec& in,
                     const Vec& weight, std::size_t rows, std::size_t in_channels,
                     std::size_t out_channels);

// ---- embeddings ----
// out (B*T,C) = wte (V,C)[tokens (B*T)] + wpe (T,C)[t]
void embedding_forward(Vec& out, const std::vector<int32_t>& tokens, const Vec& wte,
                       const Vec& wpe, std::size_t batch, std::size_t seq_len,
                       std::size_t channels);
// dwte (V,C) += dout row of each (b,t) at row tokens[b,t];  dwpe (T,C) += sum over b of dout
void embedding_backward(Vec& dwte, Vec& dwpe, const Vec& dout, const std::vector<int32_t>& tokens,
                        std::size_t batch, std::size_t seq_len, std::size_t channels);

// ---- causal multi-head self-attention, scale 1/sqrt(hs) ----
// out (B,T,C), att (B,NH,T,T) <- qkv (B,T,3C). att[b,h,t,t2] = softmax over t2 <= t of
// scale * q[b,t,h]·k[b,t2,h]; exactly 0 for t2 > t. out[b,t,h] = sum_t2 att[b,h,t,t2] v[b,t2,h].
void attention_forward(Vec& out, Vec& att, const Vec& qkv, std::size_t batch, std::size_t seq_len,
                       std::size_t channels, std::size_t num_heads);
// dqkv (B,T,3C) (overwrite) <- dout (B,T,C), qkv, att (the forward's probabilities)
void attention_backward(Vec& dqkv, const Vec& dout, const Vec& qkv, const Vec& att,
                        std::size_t batch, std::size_t seq_len, std::size_t channels,
                        std::size_t num_heads);

// ---- softmax cross-entropy ----
// losses (N) = -log softmax(logits row)[target];
// dlogits (N,V) = dloss_scale * (softmax(logits row) - onehot(target)).
void crossentropy_forward_backward(Vec& losses, Vec& dlogits, const Vec& logits,
                                   const std::vector<int32_t>& targets, std::size_t rows,
                                   std::size_t vocab, double dloss_scale);

// ---- reductions ----
// Accurate references for sum / sum_squares (long double accumulation: ~1e-19 relative, far
// below the double accumulation under test), and sum of |x| for error bounds.
long double accurate_sum(const std::vector<float>& x);
long double accurate_sum_squares(const std::vector<float>& x);
double sum_abs(const std::vector<float>& x);

// ---- optimizer ----
// One AdamW update of every element, exactly the formula in AdamWArgs's comment, with the
// float hyper-parameters widened to double.
void adamw_update(Vec& param, const Vec& grad, Vec& exp_avg, Vec& exp_avg_sq,
                  const AdamWArgs& args);

}  // namespace shardtrain::naive
