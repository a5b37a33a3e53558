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
// Precision (backend.hpp Precision), chosen at construction:
//   fp32: cuBLAS fp32 products, as below.
//   bf16: every matmul_forward/matmul_backward product rounds its two fp32 operands to bf16 into
//         scratch (launch_to_bf16, round to nearest even) and multiplies them with cuBLASLt:
//         A/B CUDA_R_16BF, C/D CUDA_R_32F, CUBLAS_COMPUTE_32F (fp32 accumulation, fp32 result; the
//         "+=" of dweight is beta = 1 on the fp32 buffer). Everything else stays fp32: parameters
//         (master weights), gradients, optimizer moments, activations between ops, and the
//         LayerNorm, softmax and cross-entropy statistics. The algorithm cuBLASLt's heuristic picks
//         for a shape is kept for the backend's life (same shape, same algorithm: reproducible),
//         restricted to reduction schemes without atomics.
//   Attention is the fused fp32 kernel of flash_attention.cuh in both precisions.
// The fp32 products: the cuBLAS handle is in CUBLAS_PEDANTIC_MATH: plain fp32 products with fp32
// accumulation, never TF32 or BF16x9 emulation, whatever NVIDIA_TF32_OVERRIDE or cuBLAS emulation
// environment variables say. Atomics are disallowed (CUBLAS_ATOMICS_NOT_ALLOWED), so with one
// stream per handle cuBLAS results are bitwise reproducible on the same GPU model and cuBLAS
// version (cuBLAS does not promise it across versions or architectures).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "flash_attention.cuh"
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"

namespace shardtrain {
namespace cuda_impl {

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
  CudaBackend(int device_index, Precision precision) : device_(device_index), precision_(precision) {
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
      if (precision_ == Precision::kBf16) {
        ST_CUBLAS_CHECK(cublasLtCreate(&lt_));
        ST_CUDA_CHECK(cudaMalloc(&lt_workspace_, kLtWorkspaceBytes));
      }
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
           compute_capability_ + ", cuBLAS" + (precision_ == Precision::kBf16 ? "Lt " : " ") +
           version_string(cublas_version_) + ", " + precision_name(precision_) + " matmuls)";
  }
  std::string device_name() const override { return device_name_; }
  Precision precision() const override { return precision_; }
  std::size_t attention_state_elements(std::size_t batch, std::size_t num_heads,
                                       std::size_t seq_len) const override {
    // The kernel's own layout must be the documented one that memory estimates use.
    const std::size_t kept = flash_attention_state_elements(batch, num_heads, seq_len);
    if (kept != attention_state_elements_for(DeviceKind::kCuda, batch, num_heads, seq_len))
      throw Error(ExitCode::kInternal, "flash attention's state differs from attention_state_elements_for(kCuda)");
    return kept;
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
    if (precision_ == Precision::kBf16) {
      const __nv_bfloat16* w16 = to_bf16(0, weight, out_channels * in_channels);
      const __nv_bfloat16* in16 = to_bf16(1, in, rows * in_channels);
      lt_gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, w16, C, in16, C, 0.0f, out, OC,
              "cublasLtMatmul bf16 (matmul_forward: out = in @ weight^T)");
    } else {
      gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, 1.0f, weight, C, in, C, 0.0f, out, OC,
           "cublasSgemm (matmul_forward: out = in @ weight^T)");
    }
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
      if (precision_ == Precision::kBf16)
        lt_gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, to_bf16(0, weight, out_channels * in_channels), C,
                to_bf16(2, dout, rows * out_channels), OC, 0.0f, din, C,
                "cublasLtMatmul bf16 (matmul_backward: din = dout @ weight)");
      else
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, 1.0f, weight, C, dout, OC, 0.0f, din, C,
             "cublasSgemm (matmul_backward: din = dout @ weight)");
    }
    if (dweight && OC > 0 && C > 0 && N > 0) {
      // Row-major dweight (OC,C) += dout^T (OC,N) @ in (N,C).
      // Column-major: dweight^T (C,OC) += in^T (C,N) @ dout (N,OC). Stored column-major, in is
      // (C,N) ld C -> op N; dout is (OC,N) ld OC -> op T; dweight^T is (C,OC) ld C. beta = 1.
      // (bf16: the rounded dout of the din product above is reused; slot 2 still holds it.)
      if (precision_ == Precision::kBf16)
        lt_gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, to_bf16(1, in, rows * in_channels), C,
                din ? bf16_slot(2) : to_bf16(2, dout, rows * out_channels), OC, 1.0f, dweight, C,
                "cublasLtMatmul bf16 (matmul_backward: dweight += dout^T @ in)");
      else
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

  // ---- attention: fused, no (T,T) matrix in memory (flash_attention.cuh) ----
  void attention_forward(float* out, float* att, const float* qkv, std::size_t batch,
                         std::size_t seq_len, std::size_t channels, std::size_t num_heads) override {
    activate();
    if (!check_attention_shape(batch, seq_len, channels, num_heads, "attention_forward")) return;
    launch_flash_attention_forward(out, att, qkv, batch, seq_len, channels, num_heads, stream_);
  }

  // `att` holds the log-sum-exp rows forward wrote; delta lives in the backend's scratch.
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                          std::size_t batch, std::size_t seq_len, std::size_t channels,
                          std::size_t num_heads) override {
    activate();
    if (!check_attention_shape(batch, seq_len, channels, num_heads, "attention_backward")) return;
    float* delta = static_cast<float*>(
        scratch_bytes(flash_attention_delta_elements(batch, num_heads, seq_len) * sizeof(float)));
    launch_flash_attention_backward(dqkv, att, delta, dout, qkv, batch, seq_len, channels, num_heads,
                                    stream_);
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
  // False for an empty shape (nothing to do); UsageError for shapes the kernels cannot take.
  static bool check_attention_shape(std::size_t batch, std::size_t seq_len, std::size_t channels,
                                    std::size_t num_heads, const char* op) {
    if (num_heads == 0 || channels % num_heads != 0)
      throw UsageError(std::string(op) + ": channels (" + std::to_string(channels) +
                       ") must be a positive multiple of num_heads (" + std::to_string(num_heads) + ")");
    if (batch == 0 || seq_len == 0 || channels == 0) return false;
    if (channels / num_heads > kFlashMaxHeadSize)
      throw UsageError(std::string(op) + ": head size " + std::to_string(channels / num_heads) +
                       " exceeds the fused attention's " + std::to_string(kFlashMaxHeadSize) +
                       "; use more heads (--heads)");
    to_int(3 * channels, "3*channels", op);
    to_int(seq_len, "seq_len", op);
    to_int(batch * num_heads, "batch*num_heads", op);
    return true;
  }

  void activate() { ST_CUDA_CHECK(cudaSetDevice(device_)); }

  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
            const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc,
            const char* what) {
    check_cublas(cublasSgemm(cublas_, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc), what,
                 __FILE__, __LINE__);
  }

  // Rounds x (n) to bf16 into bf16 scratch slot `slot` (0..2, grow-only, one per operand of a
  // product) and returns it.
  const __nv_bfloat16* to_bf16(int slot, const float* x, std::size_t n) {
    Bf16Slot& sl = bf16_slots_[slot];
    if (n > sl.capacity) {
      if (sl.data) {
        ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
        ST_CUDA_CHECK(cudaFree(sl.data));
        sl.data = nullptr;
        sl.capacity = 0;
      }
      ST_CUDA_CHECK(cudaMalloc(&sl.data, n * sizeof(__nv_bfloat16)));
      sl.capacity = n;
    }
    launch_to_bf16(sl.data, x, n, stream_);
    return sl.data;
  }
  const __nv_bfloat16* bf16_slot(int slot) const { return bf16_slots_[slot].data; }

  // Column-major D (m,n) ldc = op(A) (m,k) @ op(B) (k,n) + beta * D with bf16 A/B, fp32 D and fp32
  // accumulation (alpha = 1). The heuristic's first algorithm for this shape is cached.
  void lt_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
               const __nv_bfloat16* A, int lda, const __nv_bfloat16* B, int ldb, float beta, float* D,
               int ldc, const char* what) {
    // D may sit at any float offset of a flat buffer (a gradient tensor): the plan is made for its
    // actual alignment (cuBLASLt's heuristic otherwise assumes 256 bytes and may pick an algorithm
    // that refuses a less aligned pointer).
    const unsigned alignment = alignment_of(D);
    const LtKey key{int(ta), int(tb), m, n, k, lda, ldb, ldc, beta != 0.0f, alignment};
    auto it = lt_plans_.find(key);
    if (it == lt_plans_.end())
      it = lt_plans_.emplace(key, make_lt_plan(ta, tb, m, n, k, lda, ldb, ldc, alignment, what)).first;
    LtPlan& p = it->second;
    const float alpha = 1.0f;
    check_cublas(cublasLtMatmul(lt_, p.desc, &alpha, A, p.a, B, p.b, &beta, D, p.c, D, p.c, &p.algo,
                                lt_workspace_, kLtWorkspaceBytes, stream_),
                 what, __FILE__, __LINE__);
  }

  using LtKey = std::tuple<int, int, int, int, int, int, int, int, bool, unsigned>;

  // The largest power of two (<= 256) dividing the address.
  static unsigned alignment_of(const void* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    unsigned a = 256;
    while (a > 1 && address % a != 0) a /= 2;
    return a;
  }
  struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };

  LtPlan make_lt_plan(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb,
                      int ldc, unsigned alignment, const char* what) {
    LtPlan p;
    ST_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    ST_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    ST_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    // Stored shapes (column-major): op N keeps (rows, cols), op T stores the transpose.
    ST_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, ta == CUBLAS_OP_N ? m : k,
                                               ta == CUBLAS_OP_N ? k : m, lda));
    ST_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, tb == CUBLAS_OP_N ? k : n,
                                               tb == CUBLAS_OP_N ? n : k, ldb));
    ST_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, m, n, ldc));
    cublasLtMatmulPreference_t pref = nullptr;
    ST_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t workspace = kLtWorkspaceBytes;
    // No atomics: split-K partial sums are reduced in place or in the workspace, in a fixed order.
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_INPLACE |
                             CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                    &schemes, sizeof schemes);
    const uint32_t c_alignment = alignment;  // C and D are the same buffer
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                    &c_alignment, sizeof c_alignment);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                    &c_alignment, sizeof c_alignment);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check_cublas(status, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (found == 0)
      throw CudaError(std::string(what) + ": cuBLASLt has no bf16 algorithm for m=" + std::to_string(m) +
                      " n=" + std::to_string(n) + " k=" + std::to_string(k));
    p.algo = result.algo;
    return p;
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
    for (auto& slot : bf16_slots_)
      if (slot.data) warn(cudaFree(slot.data), "cudaFree (bf16 operands)");
    for (auto& [key, plan] : lt_plans_) {
      cublasLtMatrixLayoutDestroy(plan.a);
      cublasLtMatrixLayoutDestroy(plan.b);
      cublasLtMatrixLayoutDestroy(plan.c);
      cublasLtMatmulDescDestroy(plan.desc);
    }
    lt_plans_.clear();
    if (lt_workspace_) warn(cudaFree(lt_workspace_), "cudaFree (cuBLASLt workspace)");
    if (lt_) cublasLtDestroy(lt_);
    lt_ = nullptr;
    lt_workspace_ = nullptr;
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

  static constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;
  struct Bf16Slot {
    __nv_bfloat16* data = nullptr;
    std::size_t capacity = 0;  // elements
  };

  int device_;
  Precision precision_;
  cublasLtHandle_t lt_ = nullptr;  // bf16 only
  void* lt_workspace_ = nullptr;
  std::map<LtKey, LtPlan> lt_plans_;
  std::array<Bf16Slot, 3> bf16_slots_{};
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

int cuda_device_count() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so later calls do not see it
    return 0;
  }
  return count;
}

bool cuda_backend_available() { return cuda_device_count() >= 1; }

std::unique_ptr<Backend> make_cuda_backend(int device_index, Precision precision) {
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
  return std::make_unique<cuda_impl::CudaBackend>(device_index, precision);
}

}  // namespace shardtrain
