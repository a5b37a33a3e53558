// Host-side launchers for the CUDA backend's own kernels (everything that is not a cuBLAS gemm).
// Each launcher enqueues its kernel(s) on `stream`, returns at once, checks the launch, and does
// nothing for empty inputs. Shapes and overwrite/accumulate semantics are those of the matching
// op in shardtrain/backend.hpp. All pointers are device pointers.
//
// Determinism: every kernel here is bitwise reproducible for fixed shapes: launch geometry is a
// function of the shapes only, reductions use fixed trees or fixed sequential orders, and no
// kernel uses floating-point atomics.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "shardtrain/backend/backend.hpp"

namespace shardtrain::cuda_impl {

// Rows per partial sum in the two-pass column reductions (LayerNorm dweight/dbias, matmul dbias).
// A constant, not a function of the device, so results are the same on every GPU model.
constexpr std::size_t kColumnChunkRows = 32;

// ---- elementwise ----
void launch_fill(float* x, std::size_t n, float value, cudaStream_t stream);
void launch_add(float* out, const float* a, const float* b, std::size_t n, cudaStream_t stream);
void launch_add(double* out, const double* a, const double* b, std::size_t n, cudaStream_t stream);
void launch_accumulate(float* y, const float* x, std::size_t n, cudaStream_t stream);
void launch_scale(float* x, std::size_t n, float s, cudaStream_t stream);
void launch_gelu_forward(float* out, const float* in, std::size_t n, cudaStream_t stream);
void launch_gelu_backward(float* din, const float* in, const float* dout, std::size_t n,
                          cudaStream_t stream);

// ---- layer norm ----
void launch_layernorm_forward(float* out, float* mean, float* rstd, const float* in,
                              const float* weight, const float* bias, std::size_t rows,
                              std::size_t channels, cudaStream_t stream);
// Scratch: layernorm_backward_scratch_bytes(rows, channels) bytes of device memory.
std::size_t layernorm_backward_scratch_bytes(std::size_t rows, std::size_t channels);
void launch_layernorm_backward(float* din, float* dweight, float* dbias, const float* dout,
                               const float* in, const float* weight, const float* mean,
                               const float* rstd, std::size_t rows, std::size_t channels,
                               void* scratch, cudaStream_t stream);

// ---- matmul helpers ----
// out (rows, cols) += bias (cols), broadcast over rows.
void launch_add_bias(float* out, const float* bias, std::size_t rows, std::size_t cols,
                     cudaStream_t stream);
// dbias (cols) += column sums of dout (rows, cols), two-pass deterministic.
std::size_t column_sums_scratch_bytes(std::size_t rows, std::size_t cols);
void launch_column_sums_accumulate(float* dbias, const float* dout, std::size_t rows,
                                   std::size_t cols, void* scratch, cudaStream_t stream);

// ---- embeddings ----
void launch_embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                              std::size_t batch, std::size_t seq_len, std::size_t channels,
                              cudaStream_t stream);
// Scratch for the stable token sort (keys, positions, CUB temporary storage).
std::size_t embedding_backward_scratch_bytes(std::size_t batch, std::size_t seq_len);
void launch_embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                               std::size_t batch, std::size_t seq_len, std::size_t channels,
                               void* scratch, std::size_t scratch_bytes, cudaStream_t stream);

// ---- bf16 products: operands rounded to nearest even (shardtrain/backend/bf16.hpp) ----
void launch_to_bf16(__nv_bfloat16* out, const float* in, std::size_t n, cudaStream_t stream);

// ---- cross-entropy ----
void launch_crossentropy_forward_backward(float* losses, float* logits, const int32_t* targets,
                                          std::size_t rows, std::size_t vocab, float dloss_scale,
                                          cudaStream_t stream);

// ---- reductions and the optimizer ----
// Writes the chunked double sum (or sum of squares) of x (n) to *result (one device double).
// Scratch: chunked_sum_scratch_bytes(n) bytes.
std::size_t chunked_sum_scratch_bytes(std::size_t n);
void launch_chunked_sum(double* result, const float* x, std::size_t n, bool squares, void* scratch,
                        cudaStream_t stream);
void launch_adamw(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                  std::size_t n, const AdamWArgs& args, cudaStream_t stream);

}  // namespace shardtrain::cuda_impl
