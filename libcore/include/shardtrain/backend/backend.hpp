// Backend interface: where tensors live and how the decoder's kernels run on them.
//
// Model code never dereferences tensor memory. It owns device-resident buffers (DeviceArray) and
// passes raw device pointers plus explicit shapes to the backend's ops. Each backend (cpu/, cuda/)
// implements every op; tests check every op of every backend against a naive reference loop.
//
// Queue semantics: a backend has one in-order compute queue. Every op is enqueued on it in program
// order; an op may return before its work is done (CUDA) or after (CPU). Results are visible to the
// host only through download() or after synchronize(). Ops that return a host value (sum_squares)
// synchronise implicitly.
//
// Conventions: all float tensors are fp32, row-major, contiguous unless a stride is given.
// Shapes in comments: B micro-batch, T sequence length, C model width, NH heads, hs = C / NH head
// size, V vocabulary, N = B*T rows, OC output channels. Ops that *accumulate* ("+=") do so into
// gradient buffers so that gradient accumulation over micro-batches and tied weights need no extra
// copies; all other outputs are overwritten.
//
// Determinism: for a fixed backend, thread count and shapes, every op is bitwise reproducible
// (no atomics-order dependence, fixed reduction orders).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardtrain {

enum class DeviceKind { kCpu, kCuda };
// The one table of its names (--device), in the order messages and --help list them.
inline constexpr std::pair<const char*, DeviceKind> kDeviceKindNames[] = {{"cpu", DeviceKind::kCpu},
                                                                          {"cuda", DeviceKind::kCuda}};

// Arithmetic precision of a backend's matrix products (--precision). Everything the interface
// exposes stays fp32 either way: parameters (the fp32 master weights), gradients, AdamW moments,
// activations, LayerNorm/softmax/cross-entropy statistics, and so every checkpoint.
//   kFp32: fp32 operands, fp32 accumulation (the CPU backend; CUDA with CUBLAS_PEDANTIC_MATH).
//   kBf16: the operands of every matmul and attention product are rounded to bf16 (round to
//          nearest even, bf16.hpp) on the fly and multiplied with fp32 accumulation and an fp32
//          result (cuBLASLt on CUDA). CUDA only.
enum class Precision { kFp32, kBf16 };
// The one table of its names (--precision), in the order messages and --help list them.
inline constexpr std::pair<const char*, Precision> kPrecisionNames[] = {{"bf16", Precision::kBf16},
                                                                         {"fp32", Precision::kFp32}};
// "fp32" / "bf16".
const char* precision_name(Precision p);
// Parses "fp32" or "bf16"; throws UsageError naming `option` otherwise.
Precision parse_precision(const std::string& text, const char* option = "--precision");

// AdamW hyper-parameters for one update of one tensor (PyTorch's AdamW semantics):
//   p -= lr * weight_decay * p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= (lr / bias_correction1) * m / (sqrt(v * (1 / bias_correction2)) + eps)
// with bias_correction1 = 1 - b1^t and bias_correction2 = 1 - b2^t for the 1-based step t.
// (Backends evaluate exactly this grouping, so CPU and CUDA agree to rounding of the same ops.)
struct AdamWArgs {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float bias_correction1 = 1.0f;
  float bias_correction2 = 1.0f;
};

// Floats a backend of kind `device` keeps from attention_forward for attention_backward (its `att`
// buffer), for (batch, num_heads, seq_len), by its published AttentionState (capabilities.hpp):
//   kCpu   the softmax probabilities, B x NH x T x T;
//   kCuda  the fused attention's log-sum-exp per query row, B x NH x T (no T x T matrix is ever
//          stored; backward recomputes the probabilities tile by tile).
// The one definition of what attention keeps: every backend's attention_state_elements returns it
// (the CUDA backend checks its kernel's layout against it), and memory estimates made before any
// backend exists (GptModel::activation_bytes_for, --memory-budget, scale-bench plan) use it.
std::size_t attention_state_elements_for(DeviceKind device, std::size_t batch, std::size_t num_heads,
                                         std::size_t seq_len);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind device() const = 0;
  // One line for logs, e.g. "cpu (oneDNN 2.6.3, 1 thread)".
  virtual std::string describe() const = 0;
  // The device's product name as its driver reports it ("NVIDIA H200"); "" for the CPU backend.
  // Looked up in peak.hpp's datasheet table.
  virtual std::string device_name() const { return ""; }
  // The precision of the matrix products (see Precision). The CPU backend is always kFp32.
  virtual Precision precision() const { return Precision::kFp32; }
  // Elements of the `att` buffer that attention_forward fills and attention_backward reads, for
  // the shape (batch, num_heads, seq_len): attention_state_elements_for(device(), ...) below.
  // Callers size the buffer with this, never with their own formula.
  virtual std::size_t attention_state_elements(std::size_t batch, std::size_t num_heads,
                                               std::size_t seq_len) const {
    return attention_state_elements_for(device(), batch, num_heads, seq_len);
  }

  // ---- memory (counts are in bytes; memory is zeroed and 64-byte aligned; allocate_bytes(0) may
  // return null; copy_bytes ranges must not overlap) ----
  virtual void* allocate_bytes(std::size_t bytes) = 0;
  virtual void release_bytes(void* ptr) = 0;
  virtual void upload_bytes(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void download_bytes(void* host_dst, const void* device_src, std::size_t bytes) = 0;
  // `n` floats of this backend's memory, readable on the host: `device_src` itself where the
  // backend's memory is host memory (the CPU), else downloaded into `scratch` (resized to n).
  const float* host_floats(const float* device_src, std::size_t n, std::vector<float>& scratch);
  virtual void copy_bytes(void* device_dst, const void* device_src, std::size_t bytes) = 0;
  virtual void fill(float* x, std::size_t n, float value) = 0;
  // Blocks until all queued work is complete.
  virtual void synchronize() = 0;

  // ---- elementwise ----
  // out = a + b  (n)
  virtual void add(float* out, const float* a, const float* b, std::size_t n) = 0;
  // y += x  (n)
  virtual void accumulate(float* y, const float* x, std::size_t n) = 0;
  // x *= s  (n)
  virtual void scale(float* x, std::size_t n, float s) = 0;
  // out = gelu_tanh(in)  (n)
  virtual void gelu_forward(float* out, const float* in, std::size_t n) = 0;
  // din = dout * gelu_tanh'(in)  (n), overwrites din
  virtual void gelu_backward(float* din, const float* in, const float* dout, std::size_t n) = 0;

  // ---- layer norm over the last dim, eps = 1e-5 ----
  // out (N,C), mean (N), rstd (N) <- in (N,C), weight (C), bias (C)
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* in,
                                 const float* weight, const float* bias, std::size_t rows,
                                 std::size_t channels) = 0;
  // din (N,C) +=, dweight (C) +=, dbias (C) += <- dout (N,C), in, weight, mean, rstd
  virtual void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout,
                                  const float* in, const float* weight, const float* mean,
                                  const float* rstd, std::size_t rows, std::size_t channels) = 0;

  // ---- matrix products (PyTorch Linear layout: weight is (OC, C)) ----
  // out (N,OC) = in (N,C) @ weight^T + bias (OC; may be null)
  virtual void matmul_forward(float* out, const float* in, const float* weight, const float* bias,
                              std::size_t rows, std::size_t in_channels,
                              std::size_t out_channels) = 0;
  // din (N,C) = dout @ weight (overwrites; may be null to skip),
  // dweight (OC,C) += dout^T @ in,  dbias (OC) += column sums of dout (may be null)
  virtual void matmul_backward(float* din, float* dweight, float* dbias, const float* dout,
                               const float* in, const float* weight, std::size_t rows,
                               std::size_t in_channels, std::size_t out_channels) = 0;

  // ---- embeddings ----
  // out (B*T,C) = wte[tokens] + wpe[t]; tokens (B*T) int32 in [0,V): the caller validates the
  // ids (GptModel does, on upload), backends do not range-check
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                 const float* wpe, std::size_t batch, std::size_t seq_len,
                                 std::size_t channels) = 0;
  // dwte (V,C) += scatter of dout rows by token; dwpe (T,C) += sum over batch of dout
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout,
                                  const int32_t* tokens, std::size_t batch, std::size_t seq_len,
                                  std::size_t channels) = 0;

  // ---- causal multi-head self-attention ----
  // out (B,T,C), att (attention_state_elements(B,NH,T) floats: what backward needs, the softmax
  // probabilities (B,NH,T,T) on the CPU) <- qkv (B,T,3C)
  // (q, k, v are the three C-wide thirds of each row; head h uses columns [h*hs, (h+1)*hs)).
  virtual void attention_forward(float* out, float* att, const float* qkv, std::size_t batch,
                                 std::size_t seq_len, std::size_t channels,
                                 std::size_t num_heads) = 0;
  // dqkv (B,T,3C) = gradient (overwrites) <- dout (B,T,C), qkv, att
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* att, std::size_t batch, std::size_t seq_len,
                                  std::size_t channels, std::size_t num_heads) = 0;

  // ---- softmax cross-entropy over the vocabulary ----
  // losses (N) = -log softmax(logits)[target]; logits (N,V) is overwritten with
  // dloss_scale * (softmax - onehot(target)), the gradient of dloss_scale * sum(losses).
  virtual void crossentropy_forward_backward(float* losses, float* logits, const int32_t* targets,
                                             std::size_t rows, std::size_t vocab,
                                             float dloss_scale) = 0;

  // ---- tensor parallelism: a slice of the vocabulary (Megatron's vocab-parallel embedding and
  // cross-entropy). This rank holds vocabulary rows [vocab_begin, vocab_begin + vocab_rows) of wte;
  // its logits are (N, V_local) with V_local >= valid, columns >= valid being padding. The model
  // sums the per-rank results over the tensor-parallel group between the calls. Backends without
  // these ops throw UsageError; their capabilities (capabilities.hpp) say so, so that the layout
  // planner refuses --tp > 1 on them before any is called.
  // out (B*T,C) = (token in the slice ? wte[token - vocab_begin] : 0) + (wpe ? wpe[t] : 0)
  virtual void embedding_forward_slice(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                                       std::size_t batch, std::size_t seq_len, std::size_t channels,
                                       std::size_t vocab_begin, std::size_t vocab_rows);
  // dwte (vocab_rows,C) += scatter of the dout rows of tokens in the slice; dwpe (T,C) += sum over
  // batch of dout when dwpe is not null
  virtual void embedding_backward_slice(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                                        std::size_t batch, std::size_t seq_len, std::size_t channels,
                                        std::size_t vocab_begin, std::size_t vocab_rows);
  // row_max (N) = max of each row's first `valid` logits (-inf when valid is 0)
  virtual void crossentropy_slice_max(float* row_max, const float* logits, std::size_t rows, std::size_t vocab_local,
                                      std::size_t valid);
  // With the group's row maxima: logits[j] <- exp(logits[j] - global_max) for j < valid, 0 for the
  // padding; stats[r] = sum of row r's exponentials; stats[rows + r] = logits[target - vocab_begin]
  // - global_max when the target is in the slice, else 0 (so the group's sum is the target's term).
  virtual void crossentropy_slice_exp(float* stats, float* logits, const float* global_max, const int32_t* targets,
                                      std::size_t rows, std::size_t vocab_local, std::size_t valid,
                                      std::size_t vocab_begin);
  // With the group's sums of exponentials: logits (holding the exponentials) <- dloss_scale *
  // (softmax - onehot(target)) over the slice: the gradient of dloss_scale * sum(losses).
  virtual void crossentropy_slice_backward(float* logits, const float* global_sum_exp, const int32_t* targets,
                                           std::size_t rows, std::size_t vocab_local, std::size_t vocab_begin,
                                           float dloss_scale);

  // ---- reductions and the optimizer ----
  // Sum of squares in double, over fixed chunks of kReductionChunk elements: each chunk is
  // summed in a fixed order (8 interleaved double lanes: element i of the chunk into lane i % 8,
  // except the last (chunk length % 8) elements, which go to lane 0 in order; lanes combined
  // ((0+1)+(2+3))+((4+5)+(6+7))), and the chunk sums are added left to right from 0.0. So the
  // value is the same for any thread count and any backend, and the per-chunk sums of a buffer
  // split at chunk boundaries are the per-chunk sums of the whole (the layout-independent
  // building block of norms over shards, contract 2 of docs/ARCHITECTURE.md).
  static constexpr std::size_t kReductionChunk = 4096;
  virtual double sum_squares(const float* x, std::size_t n) = 0;
  // Sum of x (n) in double, same chunking rule.
  virtual double sum(const float* x, std::size_t n) = 0;
  // One AdamW update of n elements.
  virtual void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                            std::size_t n, const AdamWArgs& args) = 0;
};

// The CPU backend: oneDNN matrix products and vectorised loops, `threads` OpenMP threads.
std::unique_ptr<Backend> make_cpu_backend(int threads);

// True when this build has the CUDA backend and a CUDA device is visible.
bool cuda_backend_available();
// CUDA devices visible to this process; 0 in a CPU-only build or where none is visible.
int cuda_device_count();
// The CUDA backend on device `device_index` with matrix products in `precision`; throws UsageError
// when unavailable.
std::unique_ptr<Backend> make_cuda_backend(int device_index, Precision precision = Precision::kFp32);

// An owning, typed device allocation of `count` elements of T on a backend.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend& backend, std::size_t count)
      : backend_(&backend),
        data_(count ? static_cast<T*>(backend.allocate_bytes(count * sizeof(T))) : nullptr),
        count_(count) {}
  ~DeviceArray() { reset(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept { *this = std::move(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      reset();
      backend_ = other.backend_;
      data_ = other.data_;
      count_ = other.count_;
      other.data_ = nullptr;
      other.count_ = 0;
    }
    return *this;
  }
  void reset() {
    if (data_) backend_->release_bytes(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  void upload(const T* host, std::size_t n, std::size_t offset = 0) {
    backend_->upload_bytes(data_ + offset, host, n * sizeof(T));
  }
  void download(T* host, std::size_t n, std::size_t offset = 0) const {
    backend_->download_bytes(host, data_ + offset, n * sizeof(T));
  }

 private:
  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace shardtrain
