// The CUDA backend: device memory, one CUDA stream as the backend's in-order queue, cuBLAS fp32
// products and the kernels of cuda_kernels.cu. Also defines cuda_backend_available() and
// make_cuda_backend() for CUDA builds (libcore/src/backend.cpp defines them otherwise).
//
// Queue: every op is enqueued on the backend's own non-blocking stream (and cuBLAS is bound to it)
// and returns at once, except: download_bytes, sum_squares and sum (they wait for their result);
// upload_bytes (waits until the host buffer has been read, so the caller may reuse or free it at
// once, pinned or not); release_bytes (waits for queued work before freeing). One backend object
// is not thread-safe; every op first makes the backend's device current on the calling thread.
//
// Row-major <-> cuBLAS column-major: a row-major (R x C) matrix with leading dimension ld is, read
// column-major, its transpose (C x R) with the same ld. So a row-major product
//   X (M x N) = A (M x K) @ B (K x N)   is computed as the column-major product
//   X^T (N x M) = B^T (N x K) @ A^T (K x M),
// i.e. cublasSgemm with the operands swapped; each call below writes out that mapping.
//
// Precision: the cuBLAS handle is in CUBLAS_PEDANTIC_MATH: plain fp32 products with fp32
// accumulation, never TF32 or BF16x9 emulation, whatever NVIDIA_TF32_OVERRIDE or cuBLAS emulation
// environment variables say. Atomics are disallowed (CUBLAS_ATOMICS_NOT_ALLOWED), so with one
// stream per handle cuBLAS results are bitwise reproducible on the same GPU model and cuBLAS
// version (cuBLAS does not promise it across versions or architectures).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <string>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"

namespace shardtrain {
namespace cuda_impl {

std::string describe_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  std::string where = file;
  auto slash = where.find_last_of('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  int device = -1;
  cudaGetDevice(&device);  // best effort, for the message only
  return std::string(call) + " failed on CUDA device " + std::to_string(device) + ": " +
         cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ") [" + where + ":" +
         std::to_string(line) + "]";
}

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  std::string message = describe_cuda_error(status, call, file, line);
  if (status == cudaErrorMemoryAllocation)
    throw UsageError(message + "; the device is out of memory: use a smaller micro-batch or "
                               "sequence length, or more ranks");
  // Sticky faults from earlier asynchronous work are reported by whichever call sees them first.
  throw CudaError(message +
                  "; if this is a kernel fault it may come from earlier queued work: rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to locate it");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  std::string where = file;
  auto slash = where.find_last_of('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  std::string message = std::string(call) + " failed: " + cublasGetStatusName(status) + " (" +
                        cublasGetStatusString(status) + ") [" + where + ":" + std::to_string(line) +
                        "]";
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    throw UsageError(message + "; the device is out of memory");
  throw CudaError(message);
}

namespace {

// cuBLAS takes int dimensions; refuse shapes that do not fit rather than truncating.
int to_int(std::size_t value, const char* what, const char* op) {
  if (value > static_cast<std::size_t>(INT_MAX))
    throw UsageError(std::string(op) + ": " + what + " = " + std::to_string(value) +
                     " exceeds cuBLAS's int range (" + std::to_string(INT_MAX) + ")");
  return static_cast<int>(value);
}

std::string version_string(int v) {  // cuBLAS: major*10000 + minor*100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index) : device_(device_index) {
    ST_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp props{};
    ST_CUDA_CHECK(cudaGetDeviceProperties(&props, device_));
    device_name_ = props.name;
    compute_capability_ = std::to_string(props.major) + std::to_string(props.minor);
    try {
      ST_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      ST_CUBLAS_CHECK(cublasCreate(&cublas_));
      ST_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
      ST_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));
      ST_CUBLAS_CHECK(cublasSetAtomicsMode(cublas_, CUBLAS_ATOMICS_NOT_ALLOWED));
      ST_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
      ST_CUBLAS_CHECK(cublasGetVersion(cublas_, &cublas_version_));
      ST_CUDA_CHECK(cudaMalloc(&result_, sizeof(double)));
    } catch (...) {
      destroy_handles();
      throw;
    }
  }

  ~CudaBackend() override { destroy_handles(); }

  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind device() const override { return DeviceKind::kCuda; }

  std::string describe() const override {
    return "cuda (device " + std::to_string(device_) + ": " + device_name_ + ", sm_" +
           compute_capability_ + ", cuBLAS " + version_string(cublas_version_) + ")";
  }

  // ---- memory ----
  void* allocate_bytes(std::size_t bytes) override {
    activate();
    if (bytes == 0) return nullptr;
    void* ptr = nullptr;
    // cudaMalloc returns 256-byte aligned memory (>= the 64 bytes promised).
    ST_CUDA_CHECK(cudaMalloc(&ptr, bytes));
    try {
      ST_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
    } catch (...) {
      cudaFree(ptr);
      throw;
    }
    return ptr;
  }

  // Never throws: it runs from DeviceArray's destructor. A failure here is logged; a sticky
  // device error will also be reported (thrown) by the next op.
  void release_bytes(void* ptr) override {
    if (!ptr) return;
    cudaError_t status = cudaSetDevice(device_);
    if (status == cudaSuccess) status = cudaStreamSynchronize(stream_);
    cudaError_t free_status = cudaFree(ptr);
    if (status == cudaSuccess) status = free_status;
    if (status != cudaSuccess)
      log_line("warning: " + describe_cuda_error(status, "cudaFree (release_bytes)", __FILE__, __LINE__));
  }

  void upload_bytes(void* device_dst, const void* host_src, std::size_t bytes) override {
    if (bytes == 0) return;
    activate();
    ST_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
    // The caller may free or reuse host_src when we return, even if it is pinned memory.
    ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void download_bytes(void* host_dst, const void* device_src, std::size_t bytes) override {
    if (bytes == 0) return;
    activate();
    ST_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
    ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // Like memcpy: the ranges must not overlap (the CPU backend's memmove tolerates overlap).
  void copy_bytes(void* device_dst, const void* device_src, std::size_t bytes) override {
    if (bytes == 0 || device_dst == device_src) return;
    activate();
    ST_CUDA_CHECK(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  void fill(float* x, std::size_t n, float value) override {
    activate();
    cuda_impl::launch_fill(x, n, value, stream_);
  }

  void synchronize() override {
    activate();
    ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // ---- elementwise ----
  void add(float* out, const float* a, const float* b, std::size_t n) override {
    activate();
    launch_add(out, a, b, n, stream_);
  }
  void accumulate(float* y, const float* x, std::size_t n) override {
    activate();
    launch_accumulate(y, x, n, stream_);
  }
  void scale(float* x, std::size_t n, float s) override {
    activate();
    launch_scale(x, n, s, stream_);
  }
  void gelu_forward(float* out, const float* in, std::size_t n) override {
    activate();
    launch_gelu_forward(out, in, n, stream_);
  }
  void gelu_backward(float* din, const float* in, const float* dout, std::size_t n) override {
    activate();
    launch_gelu_backward(din, in, dout, n, stream_);
  }

  // ---- layer norm ----
  void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight,
                         const float* bias, std::size_t rows, std::size_t channels) override {
    activate();
    launch_layernorm_forward(out, mean, rstd, in, weight, bias, rows, channels, stream_);
  }

  void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout,
                          const float* in, const float* weight, const float* mean,
                          const float* rstd, std::size_t rows, std::size_t channels) override {
    activate();
    void* scratch = scratch_bytes(layernorm_backward_scratch_bytes(rows, channels));
    launch_layernorm_backward(din, dweight, dbias, dout, in, weight, mean, rstd, rows, channels,
                              scratch, stream_);
  }

  // ---- matrix products ----
  void matmul_forward(float* out, const float* in, const float* weight, const float* bias,
                      std::size_t rows, std::size_t in_channels, std::size_t out_channels) override {
    activate();
    if (rows == 0 || out_channels == 0) return;
    const char* op = "matmul_forward";
    const int N = to_int(rows, "rows", op), C = to_int(in_channels, "in_channels", op),
              OC = to_int(out_channels, "out_channels", op);
    // Row-major out (N,OC) = in (N,C) @ weight^T, weight (OC,C).
    // Column-major: out^T (OC,N) = weight (OC,C) @ in^T (C,N). Stored column-major, weight is
    // (C,OC) ld C -> op T; in is (C,N) ld C -> op N; out^T is (OC,N) ld OC.
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, 1.0f, weight, C, in, C, 0.0f, out, OC,
         "cublasSgemm (matmul_forward: out = in @ weight^T)");
    if (bias) launch_add_bias(out, bias, rows, out_channels, stream_);
  }

  void matmul_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                       const float* weight, std::size_t rows, std::size_t in_channels,
                       std::size_t out_channels) override {
    activate();
    const char* op = "matmul_backward";
    const int N = to_int(rows, "rows", op), C = to_int(in_channels, "in_channels", op),
              OC = to_int(out_channels, "out_channels", op);
    if (din && N > 0 && C > 0) {
      // Row-major din (N,C) = dout (N,OC) @ weight (OC,C).
      // Column-major: din^T (C,N) = weight^T (C,OC) @ dout^T (OC,N). Stored column-major, weight
      // is (C,OC) ld C -> op N; dout is (OC,N) ld OC -> op N; din^T is (C,N) ld C. beta = 0
      // overwrites (cuBLAS does not read din).
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, 1.0f, weight, C, dout, OC, 0.0f, din, C,
           "cublasSgemm (matmul_backward: din = dout @ weight)");
    }
    if (dweight && OC > 0 && C > 0 && N > 0) {
      // Row-major dweight (OC,C) += dout^T (OC,N) @ in (N,C).
      // Column-major: dweight^T (C,OC) += in^T (C,N) @ dout (N,OC). Stored column-major, in is
      // (C,N) ld C -> op N; dout is (OC,N) ld OC -> op T; dweight^T is (C,OC) ld C. beta = 1.
      gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, 1.0f, in, C, dout, OC, 1.0f, dweight, C,
           "cublasSgemm (matmul_backward: dweight += dout^T @ in)");
    }
    if (dbias && rows > 0 && out_channels > 0) {
      void* scratch = scratch_bytes(column_sums_scratch_bytes(rows, out_channels));
      launch_column_sums_accumulate(dbias, dout, rows, out_channels, scratch, stream_);
    }
  }

  // ---- embeddings ----
  // Token ids are trusted to lie in [0,V): the interface does not pass V, so an out-of-range id
  // cannot be checked here and faults (illegal address) like an out-of-bounds index.
  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                         std::size_t batch, std::size_t seq_len, std::size_t channels) override {
    activate();
    launch_embedding_forward(out, tokens, wte, wpe, batch, seq_len, channels, stream_);
  }

  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                          std::size_t batch, std::size_t seq_len, std::size_t channels) override {
    activate();
    if (batch * seq_len == 0 || channels == 0) return;
    const std::size_t bytes = embedding_backward_scratch_bytes(batch, seq_len);
    void* scratch = scratch_bytes(bytes);
    launch_embedding_backward(dwte, dwpe, dout, tokens, batch, seq_len, channels, scratch, bytes,
                              stream_);
  }

  // ---- attention ----
  // Per sequence b and head h (batched over heads with strided cuBLAS calls, one call per b):
  //   q, k, v (T,hs): rows of qkv at b*T*3C + {0, C, 2C} + h*hs, row stride 3C
  //   att (T,T) at (b*NH + h)*T*T; out (T,hs) at b*T*C + h*hs, row stride C.
  void attention_forward(float* out, float* att, const float* qkv, std::size_t batch,
                         std::size_t seq_len, std::size_t channels, std::size_t num_heads) override {
    activate();
    const char* op = "attention_forward";
    const AttentionShape s = attention_shape(batch, seq_len, channels, num_heads, op);
    if (s.empty) return;
    for (std::size_t b = 0; b < batch; ++b) {
      const float* q = qkv + b * s.seq_stride_qkv;
      const float* k = q + s.C;
      float* att_b = att + b * s.att_batch_stride;
      // Row-major scores (T,T) = scale * q (T,hs) @ k^T. Column-major: scores^T (T,T) =
      // k (T,hs) @ q^T (hs,T). Stored column-major k and q are (hs,T) ld 3C: k -> op T, q -> op N;
      // scores^T ld T. Heads: A/B stride hs, C stride T*T.
      gemm_strided(CUBLAS_OP_T, CUBLAS_OP_N, s.T, s.T, s.hs, s.scale, k, s.ld_qkv, s.hs, q, s.ld_qkv,
                   s.hs, 0.0f, att_b, s.T, s.att_head_stride, s.NH,
                   "cublasSgemmStridedBatched (attention_forward: scores = q @ k^T)");
    }
    launch_causal_softmax(att, batch * num_heads * seq_len, seq_len, stream_);
    for (std::size_t b = 0; b < batch; ++b) {
      const float* v = qkv + b * s.seq_stride_qkv + 2 * s.C;
      const float* att_b = att + b * s.att_batch_stride;
      float* out_b = out + b * s.seq_stride_out;
      // Row-major out (T,hs) = att (T,T) @ v (T,hs). Column-major: out^T (hs,T) = v^T (hs,T) @
      // att^T (T,T). Stored column-major v is (hs,T) ld 3C -> op N; att is (T,T) ld T, read as
      // att^T -> op N; out^T is (hs,T) ld C. Heads: v/out stride hs, att stride T*T.
      gemm_strided(CUBLAS_OP_N, CUBLAS_OP_N, s.hs, s.T, s.T, 1.0f, v, s.ld_qkv, s.hs, att_b, s.T,
                   s.att_head_stride, 0.0f, out_b, s.ld_out, s.hs, s.NH,
                   "cublasSgemmStridedBatched (attention_forward: out = att @ v)");
    }
  }

  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                          std::size_t batch, std::size_t seq_len, std::size_t channels,
                          std::size_t num_heads) override {
    activate();
    const char* op = "attention_backward";
    const AttentionShape s = attention_shape(batch, seq_len, channels, num_heads, op);
    if (s.empty) return;
    // datt / dpreatt (B,NH,T,T) in scratch.
    float* datt = static_cast<float*>(
        scratch_bytes(batch * num_heads * seq_len * seq_len * sizeof(float)));
    for (std::size_t b = 0; b < batch; ++b) {
      const float* v = qkv + b * s.seq_stride_qkv + 2 * s.C;
      const float* dout_b = dout + b * s.seq_stride_out;
      const float* att_b = att + b * s.att_batch_stride;
      float* datt_b = datt + b * s.att_batch_stride;
      float* dv = dqkv + b * s.seq_stride_qkv + 2 * s.C;
      // Row-major datt (T,T) = dout (T,hs) @ v^T. Column-major: datt^T (T,T) = v (T,hs) @
      // dout^T (hs,T). Stored column-major v is (hs,T) ld 3C -> op T; dout is (hs,T) ld C -> op N.
      gemm_strided(CUBLAS_OP_T, CUBLAS_OP_N, s.T, s.T, s.hs, 1.0f, v, s.ld_qkv, s.hs, dout_b,
                   s.ld_out, s.hs, 0.0f, datt_b, s.T, s.att_head_stride, s.NH,
                   "cublasSgemmStridedBatched (attention_backward: datt = dout @ v^T)");
      // Row-major dv (T,hs) = att^T (T,T) @ dout (T,hs). Column-major: dv^T (hs,T) =
      // dout^T (hs,T) @ att (T,T). Stored column-major dout is (hs,T) ld C -> op N; att is
      // att^T ld T -> op T; dv^T is (hs,T) ld 3C.
      gemm_strided(CUBLAS_OP_N, CUBLAS_OP_T, s.hs, s.T, s.T, 1.0f, dout_b, s.ld_out, s.hs, att_b,
                   s.T, s.att_head_stride, 0.0f, dv, s.ld_qkv, s.hs, s.NH,
                   "cublasSgemmStridedBatched (attention_backward: dv = att^T @ dout)");
    }
    // dpreatt = att * (datt - rowsum(att * datt)), zeros above the diagonal; the 1/sqrt(hs)
    // score scale is applied as alpha of the two products below.
    launch_causal_softmax_backward(datt, att, batch * num_heads * seq_len, seq_len, stream_);
    for (std::size_t b = 0; b < batch; ++b) {
      const float* q = qkv + b * s.seq_stride_qkv;
      const float* k = q + s.C;
      const float* dpre_b = datt + b * s.att_batch_stride;
      float* dq = dqkv + b * s.seq_stride_qkv;
      float* dk = dq + s.C;
      // Row-major dq (T,hs) = scale * dpre (T,T) @ k (T,hs). Column-major: dq^T (hs,T) =
      // k^T (hs,T) @ dpre^T (T,T). Stored column-major k is (hs,T) ld 3C -> op N; dpre is dpre^T
      // ld T -> op N; dq^T is (hs,T) ld 3C.
      gemm_strided(CUBLAS_OP_N, CUBLAS_OP_N, s.hs, s.T, s.T, s.scale, k, s.ld_qkv, s.hs, dpre_b, s.T,
                   s.att_head_stride, 0.0f, dq, s.ld_qkv, s.hs, s.NH,
                   "cublasSgemmStridedBatched (attention_backward: dq = dpreatt @ k)");
      // Row-major dk (T,hs) = scale * dpre^T (T,T) @ q (T,hs). Column-major: dk^T (hs,T) =
      // q^T (hs,T) @ dpre (T,T). Stored column-major q is (hs,T) ld 3C -> op N; dpre is dpre^T
      // ld T -> op T; dk^T is (hs,T) ld 3C.
      gemm_strided(CUBLAS_OP_N, CUBLAS_OP_T, s.hs, s.T, s.T, s.scale, q, s.ld_qkv, s.hs, dpre_b, s.T,
                   s.att_head_stride, 0.0f, dk, s.ld_qkv, s.hs, s.NH,
                   "cublasSgemmStridedBatched (attention_backward: dk = dpreatt^T @ q)");
    }
  }

  // ---- cross-entropy ----
  void crossentropy_forward_backward(float* losses, float* logits, const int32_t* targets,
                                     std::size_t rows, std::size_t vocab, float dloss_scale) override {
    activate();
    launch_crossentropy_forward_backward(losses, logits, targets, rows, vocab, dloss_scale, stream_);
  }

  // ---- reductions and the optimizer ----
  double sum_squares(const float* x, std::size_t n) override { return chunked_sum(x, n, true); }
  double sum(const float* x, std::size_t n) override { return chunked_sum(x, n, false); }

  void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                    std::size_t n, const AdamWArgs& args) override {
    activate();
    launch_adamw(param, grad, exp_avg, exp_avg_sq, n, args, stream_);
  }

 private:
  struct AttentionShape {
    bool empty = false;
    int T = 0, C = 0, NH = 0, hs = 0, ld_qkv = 0, ld_out = 0;
    long long att_head_stride = 0;       // T*T
    std::size_t att_batch_stride = 0;    // NH*T*T
    std::size_t seq_stride_qkv = 0;      // T*3C
    std::size_t seq_stride_out = 0;      // T*C
    float scale = 1.0f;                  // 1/sqrt(hs), as the CPU backend forms it
  };

  static AttentionShape attention_shape(std::size_t batch, std::size_t seq_len, std::size_t channels,
                                        std::size_t num_heads, const char* op) {
    AttentionShape s;
    if (num_heads == 0 || channels % num_heads != 0)
      throw UsageError(std::string(op) + ": channels (" + std::to_string(channels) +
                       ") must be a positive multiple of num_heads (" + std::to_string(num_heads) + ")");
    if (batch == 0 || seq_len == 0 || channels == 0) {
      s.empty = true;
      return s;
    }
    s.T = to_int(seq_len, "seq_len", op);
    s.C = to_int(channels, "channels", op);
    s.NH = to_int(num_heads, "num_heads", op);
    s.hs = s.C / s.NH;
    s.ld_qkv = to_int(3 * channels, "3*channels", op);
    s.ld_out = s.C;
    s.att_head_stride = static_cast<long long>(seq_len) * static_cast<long long>(seq_len);
    s.att_batch_stride = num_heads * seq_len * seq_len;
    s.seq_stride_qkv = seq_len * 3 * channels;
    s.seq_stride_out = seq_len * channels;
    s.scale = 1.0f / std::sqrt(static_cast<float>(s.hs));
    return s;
  }

  void activate() { ST_CUDA_CHECK(cudaSetDevice(device_)); }

  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
            const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
            const char* what) {
    check_cublas(cublasSgemm(cublas_, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc), what,
                 __FILE__, __LINE__);
  }

  void gemm_strided(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                    const float* A, int lda, long long stride_a, const float* B, int ldb,
                    long long stride_b, float beta, float* C, int ldc, long long stride_c, int batch,
                    const char* what) {
    check_cublas(cublasSgemmStridedBatched(cublas_, ta, tb, m, n, k, &alpha, A, lda, stride_a, B, ldb,
                                           stride_b, &beta, C, ldc, stride_c, batch),
                 what, __FILE__, __LINE__);
  }

  double chunked_sum(const float* x, std::size_t n, bool squares) {
    activate();
    if (n == 0) return 0.0;
    void* scratch = scratch_bytes(chunked_sum_scratch_bytes(n));
    launch_chunked_sum(result_, x, n, squares, scratch, stream_);
    double value = 0.0;
    ST_CUDA_CHECK(cudaMemcpyAsync(&value, result_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
    ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return value;
  }

  // A grow-only device scratch area shared by the ops (they run in queue order, so one op's use
  // ends before the next op's kernels start). Growing waits for queued work before freeing.
  void* scratch_bytes(std::size_t bytes) {
    if (bytes <= scratch_capacity_) return scratch_;
    if (scratch_) {
      ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
      ST_CUDA_CHECK(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_capacity_ = 0;
    }
    ST_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
    scratch_capacity_ = bytes;
    return scratch_;
  }

  // Never throws (destructor path); failures are logged.
  void destroy_handles() noexcept {
    auto warn = [](cudaError_t status, const char* call) {
      if (status != cudaSuccess)
        log_line("warning: " + describe_cuda_error(status, call, __FILE__, __LINE__));
    };
    warn(cudaSetDevice(device_), "cudaSetDevice (backend teardown)");
    if (stream_) warn(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (backend teardown)");
    if (scratch_) warn(cudaFree(scratch_), "cudaFree (scratch)");
    if (result_) warn(cudaFree(result_), "cudaFree (result)");
    if (cublas_) {
      cublasStatus_t status = cublasDestroy(cublas_);
      if (status != CUBLAS_STATUS_SUCCESS)
        log_line(std::string("warning: cublasDestroy failed: ") + cublasGetStatusName(status));
    }
    if (stream_) warn(cudaStreamDestroy(stream_), "cudaStreamDestroy");
    scratch_ = nullptr;
    result_ = nullptr;
    cublas_ = nullptr;
    stream_ = nullptr;
  }

  int device_;
  std::string device_name_;
  std::string compute_capability_;
  int cublas_version_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  double* result_ = nullptr;  // one device double for sum/sum_squares
  void* scratch_ = nullptr;
  std::size_t scratch_capacity_ = 0;
};

}  // namespace
}  // namespace cuda_impl

bool cuda_backend_available() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so later calls do not see it
    return false;
  }
  return count >= 1;
}

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw UsageError("CUDA device " + std::to_string(device_index) +
                     " is not available: no usable CUDA device (" + cudaGetErrorName(status) + ": " +
                     cudaGetErrorString(status) + "); use --device cpu");
  }
  if (device_index < 0 || device_index >= count)
    throw UsageError("CUDA device " + std::to_string(device_index) + " is not available: " +
                     std::to_string(count) + " CUDA device" + (count == 1 ? " is" : "s are") +
                     " visible (valid indices 0.." + std::to_string(count - 1) + ")");
  return std::make_unique<cuda_impl::CudaBackend>(device_index);
}

}  // namespace shardtrain
