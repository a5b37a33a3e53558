// The CUDA backend's own kernels (all but the matrix products, which are cuBLAS calls in
// cuda_backend.cu) and their launchers. See cuda_kernels.cuh for the contract.
//
// Conventions here:
//  - Launch geometry depends only on the shapes (never on the device's SM count), and every
//    reduction has a fixed order: results are bitwise reproducible for fixed shapes, and the same
//    on every GPU model for the same compiled code.
//  - No floating-point atomics anywhere. Cross-row reductions (LayerNorm dweight/dbias, matmul
//    dbias) are two-pass: per-(row chunk, column) partial sums, then one thread per column adds
//    the partials in chunk order. Embedding backward sorts tokens stably (CUB radix sort) and lets
//    one thread per (distinct token, channel) add its rows in position order.
//  - Element indices are std::size_t throughout; grid-stride loops cover any n.
//  - Math follows the CPU backend (libcore/src/cpu/cpu_backend.cpp) expression by expression, with
//    the CUDA libm (expf, tanhf, sqrtf: correctly rounded sqrt/div as nvcc's defaults
//    -prec-sqrt=true -prec-div=true give); nvcc may fuse a*b+c into FMAs (as GCC does on the CPU),
//    so elementwise results agree with the CPU to a few ulp, not bitwise.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"

namespace shardtrain::cuda_impl {
namespace {

constexpr int kThreads = 256;          // elementwise and row kernels
constexpr int kRowThreads = 128;       // one block per LayerNorm row
constexpr std::size_t kMaxBlocks = std::size_t{1} << 20;  // grid-stride beyond this

unsigned blocks_for(std::size_t work_items, int threads_per_block) {
  std::size_t blocks = (work_items + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(std::min(std::max<std::size_t>(blocks, 1), kMaxBlocks));
}
unsigned row_blocks(std::size_t rows) {
  return static_cast<unsigned>(std::min(std::max<std::size_t>(rows, 1), kMaxBlocks));
}
std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

#define ST_GRID_STRIDE(i, n)                                                     \
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += std::size_t(gridDim.x) * blockDim.x)

// ---- reductions inside a warp / block (fixed trees) ----
// Butterfly (xor) reductions: every lane ends with the same value, because a+b == b+a bitwise.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
// Block-wide sum/max for blockDim.x a multiple of 32 (<= 1024); every thread gets the result.
// `shared` holds 32 floats; the leading barrier makes back-to-back calls safe.
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  v = kMax ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = shared[0];
  for (int w = 1; w < warps; ++w) r = kMax ? fmaxf(r, shared[w]) : r + shared[w];
  return r;
}

// ---- elementwise ----
__global__ void fill_kernel(float* x, std::size_t n, float value) {
  ST_GRID_STRIDE(i, n) x[i] = value;
}
// A lone addition is never contracted into an FMA: exactly __fadd_rn / __dadd_rn.
template <typename T>
__global__ void add_kernel(T* out, const T* a, const T* b, std::size_t n) {
  ST_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}
__global__ void accumulate_kernel(float* y, const float* x, std::size_t n) {
  ST_GRID_STRIDE(i, n) y[i] += x[i];
}
__global__ void scale_kernel(float* x, std::size_t n, float s) {
  ST_GRID_STRIDE(i, n) x[i] *= s;
}

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
__device__ __forceinline__ float gelu(float x) {
  float u = kGeluScale * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}
// d gelu / dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 a x^2)
__device__ __forceinline__ float gelu_grad(float x) {
  float u = kGeluScale * (x + 0.044715f * x * x * x);
  float t = tanhf(u);
  float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}
__global__ void gelu_forward_kernel(float* out, const float* in, std::size_t n) {
  ST_GRID_STRIDE(i, n) out[i] = gelu(in[i]);
}
__global__ void gelu_backward_kernel(float* din, const float* in, const float* dout, std::size_t n) {
  ST_GRID_STRIDE(i, n) din[i] = dout[i] * gelu_grad(in[i]);
}

// ---- layer norm ----
constexpr float kLayerNormEps = 1e-5f;

// One block per row (grid-stride over rows): two-pass mean and biased variance.
__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* in,
                                         const float* weight, const float* bias, std::size_t rows,
                                         std::size_t C) {
  __shared__ float shared[32];
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = in + r * C;
    float s = 0.0f;
    for (std::size_t c = threadIdx.x; c < C; c += blockDim.x) s += x[c];
    const float m = block_reduce<false>(s, shared) / static_cast<float>(C);
    float v = 0.0f;
    for (std::size_t c = threadIdx.x; c < C; c += blockDim.x) {
      float d = x[c] - m;
      v += d * d;
    }
    v = block_reduce<false>(v, shared) / static_cast<float>(C);
    const float rs = 1.0f / sqrtf(v + kLayerNormEps);
    float* y = out + r * C;
    for (std::size_t c = threadIdx.x; c < C; c += blockDim.x)
      y[c] = (x[c] - m) * rs * weight[c] + bias[c];
    if (threadIdx.x == 0) {
      if (mean) mean[r] = m;
      if (rstd) rstd[r] = rs;
    }
  }
}

// din += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd, dnorm = weight * dout.
__global__ void layernorm_backward_input_kernel(float* din, const float* dout, const float* in,
                                                const float* weight, const float* mean,
                                                const float* rstd, std::size_t rows, std::size_t C) {
  __shared__ float shared[32];
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = in + r * C;
    const float* dy = dout + r * C;
    const float m = mean[r], rs = rstd[r];
    float a = 0.0f, b = 0.0f;
    for (std::size_t c = threadIdx.x; c < C; c += blockDim.x) {
      float norm = (x[c] - m) * rs;
      float dnorm = weight[c] * dy[c];
      a += dnorm;
      b += dnorm * norm;
    }
    const float dnorm_mean = block_reduce<false>(a, shared) / static_cast<float>(C);
    const float dnorm_norm_mean = block_reduce<false>(b, shared) / static_cast<float>(C);
    float* dx = din + r * C;
    for (std::size_t c = threadIdx.x; c < C; c += blockDim.x) {
      float norm = (x[c] - m) * rs;
      float dnorm = weight[c] * dy[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rs;
    }
  }
}

// Pass 1 of the column reductions: one thread per (row chunk p, column c) sums its
// kColumnChunkRows rows in row order. kLayerNorm: partial_a gets sum dout*norm (dweight) and
// partial_b sum dout (dbias); otherwise only partial_b (column sums of dout).
template <bool kLayerNorm>
__global__ void column_partials_kernel(float* partial_a, float* partial_b, const float* dout,
                                       const float* in, const float* mean, const float* rstd,
                                       std::size_t rows, std::size_t cols, std::size_t chunks) {
  ST_GRID_STRIDE(idx, chunks * cols) {
    const std::size_t p = idx / cols, c = idx % cols;
    const std::size_t r0 = p * kColumnChunkRows;
    const std::size_t r1 = min(rows, r0 + kColumnChunkRows);
    float a = 0.0f, b = 0.0f;
    for (std::size_t r = r0; r < r1; ++r) {
      const float dy = dout[r * cols + c];
      if constexpr (kLayerNorm) a += dy * ((in[r * cols + c] - mean[r]) * rstd[r]);
      b += dy;
    }
    if constexpr (kLayerNorm) partial_a[idx] = a;
    partial_b[idx] = b;
  }
}

// Pass 2: one thread per column adds the partials in chunk order, then adds that into the output.
__global__ void column_finalize_kernel(float* out_a, const float* partial_a, float* out_b,
                                       const float* partial_b, std::size_t cols, std::size_t chunks) {
  ST_GRID_STRIDE(c, cols) {
    if (out_a) {
      float s = 0.0f;
      for (std::size_t p = 0; p < chunks; ++p) s += partial_a[p * cols + c];
      out_a[c] += s;
    }
    if (out_b) {
      float s = 0.0f;
      for (std::size_t p = 0; p < chunks; ++p) s += partial_b[p * cols + c];
      out_b[c] += s;
    }
  }
}

__global__ void add_bias_kernel(float* out, const float* bias, std::size_t rows, std::size_t cols) {
  ST_GRID_STRIDE(i, rows * cols) out[i] += bias[i % cols];
}

// ---- embeddings ----
__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte,
                                         const float* wpe, std::size_t N, std::size_t T,
                                         std::size_t C) {
  ST_GRID_STRIDE(idx, N * C) {
    const std::size_t i = idx / C, c = idx % C;
    const std::size_t tok = static_cast<std::size_t>(tokens[i]);
    out[idx] = wte[tok * C + c] + wpe[(i % T) * C + c];
  }
}

__global__ void iota_kernel(int32_t* x, std::size_t n) {
  ST_GRID_STRIDE(i, n) x[i] = static_cast<int32_t>(i);
}

// After a stable sort of (token, position) pairs: the thread for (sorted index i, channel c)
// works only when i starts a run of equal tokens; it adds the run's dout rows into dwte in
// increasing position order, starting from dwte's value: the same sequence of float additions
// as the CPU backend's position-ordered loop.
__global__ void embedding_backward_wte_kernel(float* dwte, const float* dout,
                                              const int32_t* sorted_tokens,
                                              const int32_t* sorted_positions, std::size_t N,
                                              std::size_t C) {
  ST_GRID_STRIDE(idx, N * C) {
    const std::size_t i = idx / C, c = idx % C;
    const int32_t tok = sorted_tokens[i];
    if (i > 0 && sorted_tokens[i - 1] == tok) continue;
    float* w = dwte + static_cast<std::size_t>(tok) * C + c;
    float acc = *w;
    for (std::size_t j = i; j < N && sorted_tokens[j] == tok; ++j)
      acc += dout[static_cast<std::size_t>(sorted_positions[j]) * C + c];
    *w = acc;
  }
}

// dwpe (T,C) += sum over b, in batch order (as the CPU's position-ordered loop).
__global__ void embedding_backward_wpe_kernel(float* dwpe, const float* dout, std::size_t B,
                                              std::size_t T, std::size_t C) {
  ST_GRID_STRIDE(idx, T * C) {
    float acc = dwpe[idx];
    for (std::size_t b = 0; b < B; ++b) acc += dout[b * T * C + idx];
    dwpe[idx] = acc;
  }
}

// ---- fp32 -> bf16 operand rounding (bf16 products) ----
__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* in, std::size_t n) {
  ST_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

// ---- cross-entropy (one block per row) ----
// loss = log(sum exp(l - max)) - (l[target] - max); logits <- dloss_scale * (softmax - onehot).
// An out-of-range target cannot be reported from here without a host sync: its row's loss and
// gradient become NaN, which the trainer's non-finite-loss check turns into a NumericalError.
__global__ void crossentropy_kernel(float* losses, float* logits, const int32_t* targets,
                                    std::size_t rows, std::size_t V, float dloss_scale) {
  __shared__ float shared[32];
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* l = logits + r * V;
    const int32_t target = targets[r];
    const bool valid = target >= 0 && static_cast<std::size_t>(target) < V;
    float mx = -INFINITY;
    for (std::size_t j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, l[j]);
    mx = block_reduce<true>(mx, shared);
    // Read before the barrier inside the next block_reduce; written only after it.
    const float target_shifted = valid ? l[target] - mx : NAN;
    float s = 0.0f;
    for (std::size_t j = threadIdx.x; j < V; j += blockDim.x) s += expf(l[j] - mx);
    s = block_reduce<false>(s, shared);
    if (threadIdx.x == 0) losses[r] = valid ? logf(s) - target_shifted : NAN;
    const float inv = dloss_scale / s;
    for (std::size_t j = threadIdx.x; j < V; j += blockDim.x) {
      float g = expf(l[j] - mx) * inv;
      if (!valid) g = NAN;
      else if (j == static_cast<std::size_t>(target)) g -= dloss_scale;
      l[j] = g;
    }
  }
}

// ---- chunked double sums ----
// The per-chunk rule is the CPU backend's (cpu_backend.cpp, chunked_sum): 8 interleaved double
// lanes (element i of a chunk goes to lane i % 8, the tail that does not fill 8 goes to lane 0),
// combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)); chunk sums are then added in chunk order,
// starting from 0.0. Every operation is a correctly rounded double op (x*x of a float is exact
// in double, so FMA contraction could not change it either): the result is bitwise equal to the
// CPU backend's, for any launch configuration.
__device__ double chunk_sum(const float* x, std::size_t begin, std::size_t end, bool squares) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      double v = x[i + j];
      lanes[j] = __dadd_rn(lanes[j], squares ? __dmul_rn(v, v) : v);
    }
  }
  for (; i < end; ++i) {
    double v = x[i];
    lanes[0] = __dadd_rn(lanes[0], squares ? __dmul_rn(v, v) : v);
  }
  return __dadd_rn(__dadd_rn(__dadd_rn(lanes[0], lanes[1]), __dadd_rn(lanes[2], lanes[3])),
                   __dadd_rn(__dadd_rn(lanes[4], lanes[5]), __dadd_rn(lanes[6], lanes[7])));
}

__global__ void chunk_sums_kernel(double* chunk_sums, const float* x, std::size_t n,
                                  std::size_t chunks, bool squares) {
  constexpr std::size_t kChunk = Backend::kReductionChunk;
  ST_GRID_STRIDE(k, chunks) {
    const std::size_t begin = k * kChunk;
    const std::size_t end = min(n, begin + kChunk);
    chunk_sums[k] = chunk_sum(x, begin, end, squares);
  }
}

// One thread adds the chunk sums in order (loads are independent, so they pipeline; only the
// dependent double adds are serial).
__global__ void ordered_total_kernel(double* result, const double* chunk_sums, std::size_t chunks) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double total = 0.0;
#pragma unroll 8
  for (std::size_t k = 0; k < chunks; ++k) total = __dadd_rn(total, chunk_sums[k]);
  *result = total;
}

// ---- AdamW (the CPU backend's expression order; see AdamWArgs) ----
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, std::size_t n, float b1,
                             float b2, float eps, float decay, float step, float inv_bc2) {
  ST_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] - decay * p[i];
    p[i] = pi - step * mi / (sqrtf(vi * inv_bc2) + eps);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Launchers

void launch_fill(float* x, std::size_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, n, value);
  ST_CUDA_CHECK_LAUNCH("fill_kernel");
}
void launch_add(float* out, const float* a, const float* b, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, a, b, n);
  ST_CUDA_CHECK_LAUNCH("add_kernel");
}
void launch_add(double* out, const double* a, const double* b, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, a, b, n);
  ST_CUDA_CHECK_LAUNCH("add_kernel");
}
void launch_accumulate(float* y, const float* x, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  accumulate_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  ST_CUDA_CHECK_LAUNCH("accumulate_kernel");
}
void launch_scale(float* x, std::size_t n, float s, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, n, s);
  ST_CUDA_CHECK_LAUNCH("scale_kernel");
}
void launch_gelu_forward(float* out, const float* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  ST_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}
void launch_gelu_backward(float* din, const float* in, const float* dout, std::size_t n,
                          cudaStream_t stream) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(din, in, dout, n);
  ST_CUDA_CHECK_LAUNCH("gelu_backward_kernel");
}

void launch_layernorm_forward(float* out, float* mean, float* rstd, const float* in,
                              const float* weight, const float* bias, std::size_t rows,
                              std::size_t channels, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  layernorm_forward_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(out, mean, rstd, in, weight,
                                                                         bias, rows, channels);
  ST_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

namespace {
std::size_t column_chunks(std::size_t rows) { return (rows + kColumnChunkRows - 1) / kColumnChunkRows; }
}  // namespace

std::size_t layernorm_backward_scratch_bytes(std::size_t rows, std::size_t channels) {
  return 2 * align_up(column_chunks(rows) * channels * sizeof(float));
}

void launch_layernorm_backward(float* din, float* dweight, float* dbias, const float* dout,
                               const float* in, const float* weight, const float* mean,
                               const float* rstd, std::size_t rows, std::size_t channels,
                               void* scratch, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  if (din) {
    layernorm_backward_input_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(
        din, dout, in, weight, mean, rstd, rows, channels);
    ST_CUDA_CHECK_LAUNCH("layernorm_backward_input_kernel");
  }
  if (!dweight && !dbias) return;
  const std::size_t chunks = column_chunks(rows);
  float* partial_a = static_cast<float*>(scratch);
  float* partial_b = reinterpret_cast<float*>(static_cast<char*>(scratch) +
                                              align_up(chunks * channels * sizeof(float)));
  column_partials_kernel<true><<<blocks_for(chunks * channels, kThreads), kThreads, 0, stream>>>(
      partial_a, partial_b, dout, in, mean, rstd, rows, channels, chunks);
  ST_CUDA_CHECK_LAUNCH("column_partials_kernel<layernorm>");
  column_finalize_kernel<<<blocks_for(channels, kThreads), kThreads, 0, stream>>>(
      dweight, partial_a, dbias, partial_b, channels, chunks);
  ST_CUDA_CHECK_LAUNCH("column_finalize_kernel");
}

void launch_add_bias(float* out, const float* bias, std::size_t rows, std::size_t cols,
                     cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  add_bias_kernel<<<blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(out, bias, rows, cols);
  ST_CUDA_CHECK_LAUNCH("add_bias_kernel");
}

std::size_t column_sums_scratch_bytes(std::size_t rows, std::size_t cols) {
  return align_up(column_chunks(rows) * cols * sizeof(float));
}

void launch_column_sums_accumulate(float* dbias, const float* dout, std::size_t rows,
                                   std::size_t cols, void* scratch, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const std::size_t chunks = column_chunks(rows);
  float* partial = static_cast<float*>(scratch);
  column_partials_kernel<false><<<blocks_for(chunks * cols, kThreads), kThreads, 0, stream>>>(
      nullptr, partial, dout, nullptr, nullptr, nullptr, rows, cols, chunks);
  ST_CUDA_CHECK_LAUNCH("column_partials_kernel<bias>");
  column_finalize_kernel<<<blocks_for(cols, kThreads), kThreads, 0, stream>>>(
      nullptr, nullptr, dbias, partial, cols, chunks);
  ST_CUDA_CHECK_LAUNCH("column_finalize_kernel");
}

void launch_embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                              std::size_t batch, std::size_t seq_len, std::size_t channels,
                              cudaStream_t stream) {
  const std::size_t N = batch * seq_len;
  if (N == 0 || channels == 0) return;
  embedding_forward_kernel<<<blocks_for(N * channels, kThreads), kThreads, 0, stream>>>(
      out, tokens, wte, wpe, N, seq_len, channels);
  ST_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}

namespace {
std::size_t radix_sort_temp_bytes(std::size_t n) {
  std::size_t temp = 0;
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr),
                                                static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<int>(n)));
  return temp;
}
}  // namespace

std::size_t embedding_backward_scratch_bytes(std::size_t batch, std::size_t seq_len) {
  const std::size_t N = batch * seq_len;
  if (N == 0) return 0;
  if (N > static_cast<std::size_t>(std::numeric_limits<int32_t>::max()))
    throw UsageError("embedding_backward: " + std::to_string(N) +
                     " token positions exceed the CUDA backend's int32 position limit");
  return 3 * align_up(N * sizeof(int32_t)) + align_up(radix_sort_temp_bytes(N));
}

void launch_embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                               std::size_t batch, std::size_t seq_len, std::size_t channels,
                               void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  const std::size_t N = batch * seq_len;
  if (N == 0 || channels == 0) return;
  if (dwpe) {
    embedding_backward_wpe_kernel<<<blocks_for(seq_len * channels, kThreads), kThreads, 0, stream>>>(
        dwpe, dout, batch, seq_len, channels);
    ST_CUDA_CHECK_LAUNCH("embedding_backward_wpe_kernel");
  }
  if (!dwte) return;
  char* base = static_cast<char*>(scratch);
  const std::size_t slot = align_up(N * sizeof(int32_t));
  int32_t* sorted_tokens = reinterpret_cast<int32_t*>(base);
  int32_t* positions = reinterpret_cast<int32_t*>(base + slot);
  int32_t* sorted_positions = reinterpret_cast<int32_t*>(base + 2 * slot);
  void* temp = base + 3 * slot;
  std::size_t temp_bytes = scratch_bytes - 3 * slot;
  iota_kernel<<<blocks_for(N, kThreads), kThreads, 0, stream>>>(positions, N);
  ST_CUDA_CHECK_LAUNCH("iota_kernel");
  // LSD radix sort is stable: equal tokens keep increasing positions.
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, sorted_tokens, positions,
                                                sorted_positions, static_cast<int>(N), 0,
                                                int(sizeof(int32_t) * 8), stream));
  embedding_backward_wte_kernel<<<blocks_for(N * channels, kThreads), kThreads, 0, stream>>>(
      dwte, dout, sorted_tokens, sorted_positions, N, channels);
  ST_CUDA_CHECK_LAUNCH("embedding_backward_wte_kernel");
}

void launch_to_bf16(__nv_bfloat16* out, const float* in, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  to_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  ST_CUDA_CHECK_LAUNCH("to_bf16_kernel");
}

void launch_crossentropy_forward_backward(float* losses, float* logits, const int32_t* targets,
                                          std::size_t rows, std::size_t vocab, float dloss_scale,
                                          cudaStream_t stream) {
  if (rows == 0 || vocab == 0) return;
  crossentropy_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(losses, logits, targets, rows, vocab,
                                                                 dloss_scale);
  ST_CUDA_CHECK_LAUNCH("crossentropy_kernel");
}

std::size_t chunked_sum_scratch_bytes(std::size_t n) {
  const std::size_t chunks = (n + Backend::kReductionChunk - 1) / Backend::kReductionChunk;
  return align_up(std::max<std::size_t>(chunks, 1) * sizeof(double));
}

void launch_chunked_sum(double* result, const float* x, std::size_t n, bool squares, void* scratch,
                        cudaStream_t stream) {
  const std::size_t chunks = (n + Backend::kReductionChunk - 1) / Backend::kReductionChunk;
  double* chunk_sums = static_cast<double*>(scratch);
  if (chunks > 0) {
    constexpr int kSumThreads = 128;
    chunk_sums_kernel<<<blocks_for(chunks, kSumThreads), kSumThreads, 0, stream>>>(chunk_sums, x, n,
                                                                                   chunks, squares);
    ST_CUDA_CHECK_LAUNCH("chunk_sums_kernel");
  }
  ordered_total_kernel<<<1, 32, 0, stream>>>(result, chunk_sums, chunks);
  ST_CUDA_CHECK_LAUNCH("ordered_total_kernel");
}

void launch_adamw(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                  std::size_t n, const AdamWArgs& a, cudaStream_t stream) {
  if (n == 0) return;
  // Host-side scalars exactly as the CPU backend forms them.
  const float decay = a.lr * a.weight_decay;
  const float step = a.lr / a.bias_correction1;
  const float inv_bc2 = 1.0f / a.bias_correction2;
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      param, grad, exp_avg, exp_avg_sq, n, a.beta1, a.beta2, a.eps, decay, step, inv_bc2);
  ST_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace shardtrain::cuda_impl
