// The CPU backend: host memory, matrix products on oneDNN, OpenBLAS or BLIS (cpu_gemm.hpp), OpenMP
// loops written to vectorise.
//
// Determinism: every loop uses a static OpenMP schedule, and every reduction across rows
// (bias, LayerNorm and embedding gradients) is partitioned by channel, so each output element is
// summed over rows in index order by exactly one thread: those results are bitwise the same for
// any thread count. Each GEMM library's products are deterministic for a fixed thread count.
#include <omp.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <limits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dnnl_gemm.hpp"
#include "host_memory.hpp"
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/base/error.hpp"
#include "vector_math.hpp"

namespace shardtrain {
namespace {

constexpr float kLayerNormEps = 1e-5f;

// Splits [0, n) into `parts` contiguous ranges; returns the range of part p.
inline void split_range(std::size_t n, int parts, int p, std::size_t& begin, std::size_t& end) {
  std::size_t base = n / parts, extra = n % parts;
  begin = p * base + std::min<std::size_t>(p, extra);
  end = begin + base + (static_cast<std::size_t>(p) < extra ? 1 : 0);
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, GemmLibrary library) : threads_(threads) {
    if (threads < 1) throw UsageError("--threads must be at least 1 (got " + std::to_string(threads) + ")");
    omp_set_num_threads(threads_);
    set_library(library);
  }

  GemmLibrary library() const { return library_; }
  // Switches the products to `library` (kAuto: oneDNN). Each library's Gemm is made once and kept,
  // so switching back and forth (the start-up measurement) keeps oneDNN's primitive cache.
  void set_library(GemmLibrary library) {
    if (library == GemmLibrary::kAuto) library = GemmLibrary::kOneDnn;
    require_gemm_library(library);
    std::unique_ptr<cpu::Gemm>& slot = gemms_[std::size_t(library)];
    if (!slot) {
      if (library == GemmLibrary::kOneDnn) slot = std::make_unique<cpu::DnnlGemm>(threads_);
      if (library == GemmLibrary::kOpenBlas) slot = cpu::make_openblas_gemm(threads_);
      if (library == GemmLibrary::kBlis) slot = cpu::make_blis_gemm(threads_);
    }
    gemm_ = slot.get();
    library_ = library;
  }

  DeviceKind device() const override { return DeviceKind::kCpu; }

  // "cpu (oneDNN 2.6.3, 1 thread)", "cpu (OpenBLAS 0.3.21 (openmp, core Cooperlake), 2 threads)".
  std::string describe() const override {
    return "cpu (" + gemm_library_version(library_) + ", " + std::to_string(threads_) +
           (threads_ == 1 ? " thread)" : " threads)");
  }

  // ---- memory ----
  void* allocate_bytes(std::size_t bytes) override { return memory_.allocate(bytes, "tensor memory"); }
  void release_bytes(void* ptr) override { memory_.release(ptr); }
  void upload_bytes(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download_bytes(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_bytes(void* dst, const void* src, std::size_t bytes) override { std::memmove(dst, src, bytes); }
  void fill(float* x, std::size_t n, float value) override {
#pragma omp parallel for simd schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < n; ++i) x[i] = value;
  }
  void synchronize() override {}

  // ---- elementwise ----
  void add(float* out, const float* a, const float* b, std::size_t n) override {
#pragma omp parallel for simd schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }
  void accumulate(float* y, const float* x, std::size_t n) override {
#pragma omp parallel for simd schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < n; ++i) y[i] += x[i];
  }
  void scale(float* x, std::size_t n, float s) override {
#pragma omp parallel for simd schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < n; ++i) x[i] *= s;
  }
  void gelu_forward(float* out, const float* in, std::size_t n) override {
#pragma omp parallel for simd schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < n; ++i) out[i] = cpu::gelu(in[i]);
  }
  void gelu_backward(float* din, const float* in, const float* dout, std::size_t n) override {
#pragma omp parallel for simd schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < n; ++i) din[i] = dout[i] * cpu::gelu_grad(in[i]);
  }

  // ---- layer norm ----
  void layernorm_forward(float* out, float* mean, float* rstd, const float* in, const float* weight,
                         const float* bias, std::size_t rows, std::size_t C) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t r = 0; r < rows; ++r) {
      const float* x = in + r * C;
      float* y = out + r * C;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (std::size_t c = 0; c < C; ++c) s += x[c];
      float m = s / static_cast<float>(C);
      float v = 0.0f;
#pragma omp simd reduction(+ : v)
      for (std::size_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
      float rs = 1.0f / std::sqrt(v / static_cast<float>(C) + kLayerNormEps);
#pragma omp simd
      for (std::size_t c = 0; c < C; ++c) y[c] = (x[c] - m) * rs * weight[c] + bias[c];
      mean[r] = m;
      rstd[r] = rs;
    }
  }

  void layernorm_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                          const float* weight, const float* mean, const float* rstd, std::size_t rows,
                          std::size_t C) override {
    // Input gradient: rows are independent.
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t r = 0; r < rows; ++r) {
      const float* x = in + r * C;
      const float* dy = dout + r * C;
      float* dx = din + r * C;
      const float m = mean[r], rs = rstd[r];
      float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
      for (std::size_t c = 0; c < C; ++c) {
        float norm = (x[c] - m) * rs;
        float dnorm = weight[c] * dy[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
      }
      dnorm_mean /= static_cast<float>(C);
      dnorm_norm_mean /= static_cast<float>(C);
#pragma omp simd
      for (std::size_t c = 0; c < C; ++c) {
        float norm = (x[c] - m) * rs;
        float dnorm = weight[c] * dy[c];
        dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rs;
      }
    }
    // Parameter gradients: partitioned by channel, rows summed in order.
#pragma omp parallel num_threads(threads_)
    {
      std::size_t c0, c1;
      split_range(C, omp_get_num_threads(), omp_get_thread_num(), c0, c1);
      for (std::size_t r = 0; r < rows; ++r) {
        const float* x = in + r * C;
        const float* dy = dout + r * C;
        const float m = mean[r], rs = rstd[r];
#pragma omp simd
        for (std::size_t c = c0; c < c1; ++c) {
          dweight[c] += dy[c] * ((x[c] - m) * rs);
          dbias[c] += dy[c];
        }
      }
    }
  }

  // ---- matrix products ----
  void matmul_forward(float* out, const float* in, const float* weight, const float* bias,
                      std::size_t N, std::size_t C, std::size_t OC) override {
    const int64_t n = N, c = C, oc = OC;
    // out (N,OC) = in (N,C) @ weight^T: weight^T[k][j] = weight[j][k] -> strides (1, C).
    gemm_->run(1, n, oc, c, in, {0, c, 1}, weight, {0, 1, c}, out, {0, oc, 1}, 1.0f, bias, false);
  }

  void matmul_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                       const float* weight, std::size_t N, std::size_t C, std::size_t OC) override {
    const int64_t n = N, c = C, oc = OC;
    // din (N,C) = dout (N,OC) @ weight (OC,C)
    if (din) gemm_->run(1, n, c, oc, dout, {0, oc, 1}, weight, {0, c, 1}, din, {0, c, 1}, 1.0f, nullptr, false);
    // dweight (OC,C) += dout^T (OC,N) @ in (N,C): dout^T[i][k] = dout[k][i] -> strides (1, OC).
    if (dweight) gemm_->run(1, oc, c, n, dout, {0, 1, oc}, in, {0, c, 1}, dweight, {0, c, 1}, 1.0f, nullptr, true);
    if (dbias) column_sums_accumulate(dbias, dout, N, OC);
  }

  // ---- embeddings ----
  void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                         std::size_t B, std::size_t T, std::size_t C) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < B * T; ++i) {
      const float* te = wte + static_cast<std::size_t>(tokens[i]) * C;
      const float* pe = wpe + (i % T) * C;
      float* o = out + i * C;
#pragma omp simd
      for (std::size_t c = 0; c < C; ++c) o[c] = te[c] + pe[c];
    }
  }

  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                          std::size_t B, std::size_t T, std::size_t C) override {
#pragma omp parallel num_threads(threads_)
    {
      std::size_t c0, c1;
      split_range(C, omp_get_num_threads(), omp_get_thread_num(), c0, c1);
      for (std::size_t i = 0; i < B * T; ++i) {
        const float* g = dout + i * C;
        float* te = dwte + static_cast<std::size_t>(tokens[i]) * C;
        float* pe = dwpe + (i % T) * C;
#pragma omp simd
        for (std::size_t c = c0; c < c1; ++c) {
          te[c] += g[c];
          pe[c] += g[c];
        }
      }
    }
  }

  // ---- attention ----
  // Attention works in groups of heads and, within a group, in blocks of kQueryBlock query rows.
  //  * Groups: heads whose (T,T) score blocks fit in kAttentionGroupBytes (at least one head) are
  //    processed together, so the score gradients of backward need one group's scratch, not the
  //    whole (B*NH,T,T) tensor.
  //  * Causal blocks: query block i (rows [i*QB, (i+1)*QB)) attends to keys [0, (i+1)*QB) only, so
  //    the products skip the masked upper blocks: with T = 256 and QB = 64 that is 10 of 16
  //    blocks, 62.5% of the score FLOPs (docs/PERFORMANCE.md has the measured effect). Entries
  //    above the diagonal inside a block are masked by the softmax (forward) or zeroed (backward),
  //    so every product only ever adds exact zeros where it covers masked positions.
  // Each head's result is a fixed sequence of products, so it is deterministic for a fixed thread
  // count like the rest of the backend.
  static constexpr std::size_t kAttentionGroupBytes = std::size_t(2) << 20;
  static constexpr std::size_t kQueryBlock = 64;
  static std::size_t attention_group(std::size_t BH, std::size_t T) {
    return std::clamp<std::size_t>(kAttentionGroupBytes / (T * T * sizeof(float)), 1, BH);
  }

  void attention_forward(float* out, float* att, const float* qkv, std::size_t B, std::size_t T,
                         std::size_t C, std::size_t NH) override {
    const std::size_t hs = C / NH, BH = B * NH, head_elems = BH * T * hs;
    const auto [q, k, v] = split_heads(qkv, B, T, C, NH);
    float* y = scratch_y_.get(head_elems);
    const int64_t t = T, h = hs;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const std::size_t group = attention_group(BH, T);
    for (std::size_t g0 = 0; g0 < BH; g0 += group) {
      const int64_t g = int64_t(std::min(group, BH - g0));
      const std::size_t hoff = g0 * T * hs;
      float* a = att + g0 * T * T;
      for (std::size_t r0 = 0; r0 < T; r0 += kQueryBlock) {
        const int64_t rows = int64_t(std::min(kQueryBlock, T - r0)), keys = int64_t(r0) + rows;
        // a[rows, 0:keys] (g) = scale * q[rows] (g,rows,hs) @ k[0:keys]^T: k^T strides (T*hs, 1, hs)
        gemm_->run(g, rows, keys, h, q + hoff + r0 * hs, {t * h, h, 1}, k + hoff, {t * h, 1, h}, a + r0 * T,
                  {t * t, t, 1}, scale, nullptr, false);
      }
      causal_softmax_rows(a, std::size_t(g), T);  // also zeroes every entry above the diagonal
      for (std::size_t r0 = 0; r0 < T; r0 += kQueryBlock) {
        const int64_t rows = int64_t(std::min(kQueryBlock, T - r0)), keys = int64_t(r0) + rows;
        // y[rows] (g,rows,hs) = a[rows, 0:keys] @ v[0:keys]
        gemm_->run(g, rows, h, keys, a + r0 * T, {t * t, t, 1}, v + hoff, {t * h, h, 1}, y + hoff + r0 * hs,
                  {t * h, h, 1}, 1.0f, nullptr, false);
      }
    }
    merge_heads(out, y, B, T, C, NH);
  }

  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                          std::size_t B, std::size_t T, std::size_t C, std::size_t NH) override {
    const std::size_t hs = C / NH, BH = B * NH, head_elems = BH * T * hs;
    const auto [q, k, v] = split_heads(qkv, B, T, C, NH);
    float* dy = scratch_y_.get(head_elems);
    split_one(dy, dout, B, T, C, NH, C, 0);
    float* dq = scratch_dqkv_.get(3 * head_elems);
    float* dk = dq + head_elems;
    float* dv = dk + head_elems;
    const std::size_t group = attention_group(BH, T);
    float* datt = scratch_att_.get(group * T * T);
    const int64_t t = T, h = hs;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    for (std::size_t g0 = 0; g0 < BH; g0 += group) {
      const int64_t g = int64_t(std::min(group, BH - g0));
      const std::size_t hoff = g0 * T * hs;
      const float* a = att + g0 * T * T;
      // Per query block: datt[rows, 0:keys] = dy[rows] @ v[0:keys]^T.
      for (std::size_t r0 = 0; r0 < T; r0 += kQueryBlock) {
        const int64_t rows = int64_t(std::min(kQueryBlock, T - r0)), keys = int64_t(r0) + rows;
        gemm_->run(g, rows, keys, h, dy + hoff + r0 * hs, {t * h, h, 1}, v + hoff, {t * h, 1, h}, datt + r0 * T,
                  {t * t, t, 1}, 1.0f, nullptr, false);
      }
      // Softmax backward (in place in datt): dpre = a * (datt - sum_j a*datt), times the scale;
      // entries above the diagonal (never written above) become zero.
#pragma omp parallel for schedule(static) num_threads(threads_)
      for (std::size_t row = 0; row < std::size_t(g) * T; ++row) {
        const std::size_t i = row % T;
        const float* p = a + row * T;
        float* d = datt + row * T;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (std::size_t j = 0; j <= i; ++j) dot += p[j] * d[j];
#pragma omp simd
        for (std::size_t j = 0; j <= i; ++j) d[j] = scale * p[j] * (d[j] - dot);
        for (std::size_t j = i + 1; j < T; ++j) d[j] = 0.0f;
      }
      for (std::size_t r0 = 0; r0 < T; r0 += kQueryBlock) {
        const int64_t rows = int64_t(std::min(kQueryBlock, T - r0)), keys = int64_t(r0) + rows;
        // dq[rows] = dpre[rows, 0:keys] @ k[0:keys]
        gemm_->run(g, rows, h, keys, datt + r0 * T, {t * t, t, 1}, k + hoff, {t * h, h, 1}, dq + hoff + r0 * hs,
                  {t * h, h, 1}, 1.0f, nullptr, false);
      }
      // Per key block (keys [c0, c0 + cols)), over the queries that see it (rows [c0, T)):
      //   dv[cols] = a[c0:T, cols]^T @ dy[c0:T];  dk[cols] = dpre[c0:T, cols]^T @ q[c0:T]
      // (transposed operands: element (m, k) is X[c0 + k][c0 + m] -> strides (T*T, 1, T)).
      for (std::size_t c0 = 0; c0 < T; c0 += kQueryBlock) {
        const int64_t cols = int64_t(std::min(kQueryBlock, T - c0)), queries = int64_t(T - c0);
        gemm_->run(g, cols, h, queries, a + c0 * T + c0, {t * t, 1, t}, dy + hoff + c0 * hs, {t * h, h, 1},
                  dv + hoff + c0 * hs, {t * h, h, 1}, 1.0f, nullptr, false);
        gemm_->run(g, cols, h, queries, datt + c0 * T + c0, {t * t, 1, t}, q + hoff + c0 * hs, {t * h, h, 1},
                  dk + hoff + c0 * hs, {t * h, h, 1}, 1.0f, nullptr, false);
      }
    }
    merge_heads_qkv(dqkv, dq, dk, dv, B, T, C, NH);
  }

  // ---- cross-entropy ----
  void crossentropy_forward_backward(float* losses, float* logits, const int32_t* targets,
                                     std::size_t rows, std::size_t V, float dloss_scale) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t r = 0; r < rows; ++r) {
      float* l = logits + r * V;
      float mx = l[0];
      for (std::size_t j = 1; j < V; ++j) mx = std::max(mx, l[j]);
      const std::size_t target = static_cast<std::size_t>(targets[r]);
      const float target_shifted = l[target] - mx;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (std::size_t j = 0; j < V; ++j) {
        l[j] = cpu::fast_exp(l[j] - mx);
        s += l[j];
      }
      // loss = logsumexp - logit[target], computed without exponentiating the target term.
      losses[r] = std::log(s) - target_shifted;
      const float inv = dloss_scale / s;
#pragma omp simd
      for (std::size_t j = 0; j < V; ++j) l[j] *= inv;
      l[target] -= dloss_scale;
    }
  }

  // ---- tensor parallelism: vocabulary slices ----
  void embedding_forward_slice(float* out, const int32_t* tokens, const float* wte, const float* wpe, std::size_t B,
                               std::size_t T, std::size_t C, std::size_t vocab_begin,
                               std::size_t vocab_rows) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < B * T; ++i) {
      const std::size_t row = static_cast<std::size_t>(tokens[i]) - vocab_begin;  // wraps when below the slice
      const float* te = row < vocab_rows ? wte + row * C : nullptr;
      const float* pe = wpe ? wpe + (i % T) * C : nullptr;
      float* o = out + i * C;
      for (std::size_t c = 0; c < C; ++c) o[c] = (te ? te[c] : 0.0f) + (pe ? pe[c] : 0.0f);
    }
  }

  void embedding_backward_slice(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, std::size_t B,
                                std::size_t T, std::size_t C, std::size_t vocab_begin,
                                std::size_t vocab_rows) override {
#pragma omp parallel num_threads(threads_)
    {
      std::size_t c0, c1;
      split_range(C, omp_get_num_threads(), omp_get_thread_num(), c0, c1);
      for (std::size_t i = 0; i < B * T; ++i) {
        const float* g = dout + i * C;
        const std::size_t row = static_cast<std::size_t>(tokens[i]) - vocab_begin;
        if (row < vocab_rows) {
          float* te = dwte + row * C;
          for (std::size_t c = c0; c < c1; ++c) te[c] += g[c];
        }
        if (dwpe) {
          float* pe = dwpe + (i % T) * C;
          for (std::size_t c = c0; c < c1; ++c) pe[c] += g[c];
        }
      }
    }
  }

  void crossentropy_slice_max(float* row_max, const float* logits, std::size_t rows, std::size_t V,
                              std::size_t valid) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t r = 0; r < rows; ++r) {
      const float* l = logits + r * V;
      float mx = -std::numeric_limits<float>::infinity();
      for (std::size_t j = 0; j < valid; ++j) mx = std::max(mx, l[j]);
      row_max[r] = mx;
    }
  }

  void crossentropy_slice_exp(float* stats, float* logits, const float* global_max, const int32_t* targets,
                              std::size_t rows, std::size_t V, std::size_t valid, std::size_t vocab_begin) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t r = 0; r < rows; ++r) {
      float* l = logits + r * V;
      const float mx = global_max[r];
      const std::size_t target = static_cast<std::size_t>(targets[r]) - vocab_begin;
      stats[rows + r] = target < valid ? l[target] - mx : 0.0f;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (std::size_t j = 0; j < valid; ++j) {
        l[j] = cpu::fast_exp(l[j] - mx);
        s += l[j];
      }
      for (std::size_t j = valid; j < V; ++j) l[j] = 0.0f;
      stats[r] = s;
    }
  }

  void crossentropy_slice_backward(float* logits, const float* global_sum_exp, const int32_t* targets,
                                   std::size_t rows, std::size_t V, std::size_t vocab_begin,
                                   float dloss_scale) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t r = 0; r < rows; ++r) {
      float* l = logits + r * V;
      const float inv = dloss_scale / global_sum_exp[r];
#pragma omp simd
      for (std::size_t j = 0; j < V; ++j) l[j] *= inv;
      const std::size_t target = static_cast<std::size_t>(targets[r]) - vocab_begin;
      if (target < V) l[target] -= dloss_scale;
    }
  }

  // ---- reductions and the optimizer ----
  double sum_squares(const float* x, std::size_t n) override { return chunked_sum(x, n, true); }
  double sum(const float* x, std::size_t n) override { return chunked_sum(x, n, false); }

  void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n, const AdamWArgs& a) override {
    const float b1 = a.beta1, b2 = a.beta2, decay = a.lr * a.weight_decay;
    const float step = a.lr / a.bias_correction1, inv_bc2 = 1.0f / a.bias_correction2;
#pragma omp parallel for simd schedule(static) num_threads(threads_)
    for (std::size_t i = 0; i < n; ++i) {
      float mi = b1 * m[i] + (1.0f - b1) * g[i];
      float vi = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      m[i] = mi;
      v[i] = vi;
      float pi = p[i] - decay * p[i];
      p[i] = pi - step * mi / (std::sqrt(vi * inv_bc2) + a.eps);
    }
  }

 private:
  void column_sums_accumulate(float* out, const float* in, std::size_t rows, std::size_t cols) {
#pragma omp parallel num_threads(threads_)
    {
      std::size_t c0, c1;
      split_range(cols, omp_get_num_threads(), omp_get_thread_num(), c0, c1);
      for (std::size_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
#pragma omp simd
        for (std::size_t c = c0; c < c1; ++c) out[c] += row[c];
      }
    }
  }

  // Row-wise causal softmax over (rows_outer * T) rows of length T; zeros above the diagonal.
  void causal_softmax_rows(float* att, std::size_t BH, std::size_t T) {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t row = 0; row < BH * T; ++row) {
      const std::size_t i = row % T;
      float* a = att + row * T;
      float mx = a[0];
      for (std::size_t j = 1; j <= i; ++j) mx = std::max(mx, a[j]);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (std::size_t j = 0; j <= i; ++j) {
        a[j] = cpu::fast_exp(a[j] - mx);
        s += a[j];
      }
      const float inv = 1.0f / s;
#pragma omp simd
      for (std::size_t j = 0; j <= i; ++j) a[j] *= inv;
      for (std::size_t j = i + 1; j < T; ++j) a[j] = 0.0f;
    }
  }

  // Copies between the head-major layout (B,NH,T,hs) and columns [offset + h*hs, ...) of rows of
  // width `width` (B,T,width): to_heads picks the heads out of the rows, else writes them back.
  void permute_heads(float* heads, float* rows, bool to_heads, std::size_t B, std::size_t T, std::size_t C,
                     std::size_t NH, std::size_t width, std::size_t offset) {
    const std::size_t hs = C / NH;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads_)
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t h = 0; h < NH; ++h)
        for (std::size_t t = 0; t < T; ++t) {
          float* head_row = heads + ((b * NH + h) * T + t) * hs;
          float* row = rows + (b * T + t) * width + offset + h * hs;
          std::memcpy(to_heads ? head_row : row, to_heads ? row : head_row, hs * sizeof(float));
        }
  }
  void split_one(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t C, std::size_t NH,
                 std::size_t width, std::size_t offset) {
    permute_heads(dst, const_cast<float*>(src), true, B, T, C, NH, width, offset);  // src is only read
  }
  void merge_one(float* dst, const float* src, std::size_t B, std::size_t T, std::size_t C, std::size_t NH,
                 std::size_t width, std::size_t offset) {
    permute_heads(const_cast<float*>(src), dst, false, B, T, C, NH, width, offset);  // src is only read
  }
  // q, k, v (each B*NH, T, hs) in the attention scratch <- qkv (B, T, 3C). Both attention passes
  // split again: every layer shares the scratch, so backward cannot reuse the forward's copy.
  struct HeadMajor {
    float *q, *k, *v;
  };
  HeadMajor split_heads(const float* qkv, std::size_t B, std::size_t T, std::size_t C, std::size_t NH) {
    const std::size_t head_elems = B * T * C;
    float* q = scratch_qkv_.get(3 * head_elems);
    HeadMajor h{q, q + head_elems, q + 2 * head_elems};
    split_one(h.q, qkv, B, T, C, NH, 3 * C, 0);
    split_one(h.k, qkv, B, T, C, NH, 3 * C, C);
    split_one(h.v, qkv, B, T, C, NH, 3 * C, 2 * C);
    return h;
  }
  void merge_heads(float* out, const float* y, std::size_t B, std::size_t T, std::size_t C, std::size_t NH) {
    merge_one(out, y, B, T, C, NH, C, 0);
  }
  void merge_heads_qkv(float* dqkv, const float* dq, const float* dk, const float* dv, std::size_t B,
                       std::size_t T, std::size_t C, std::size_t NH) {
    merge_one(dqkv, dq, B, T, C, NH, 3 * C, 0);
    merge_one(dqkv, dk, B, T, C, NH, 3 * C, C);
    merge_one(dqkv, dv, B, T, C, NH, 3 * C, 2 * C);
  }

  // Sum (or sum of squares) over fixed chunks: each chunk in 8 interleaved double lanes combined
  // in a fixed order, chunk sums added in index order; independent of the thread count.
  double chunked_sum(const float* x, std::size_t n, bool squares) {
    const std::size_t chunks = (n + kReductionChunk - 1) / kReductionChunk;
    std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (std::size_t ch = 0; ch < chunks; ++ch) {
      const std::size_t begin = ch * kReductionChunk, end = std::min(n, begin + kReductionChunk);
      double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      std::size_t i = begin;
      for (; i + 8 <= end; i += 8)
        for (int j = 0; j < 8; ++j) {
          double value = x[i + j];
          lanes[j] += squares ? value * value : value;
        }
      for (; i < end; ++i) {
        double value = x[i];
        lanes[0] += squares ? value * value : value;
      }
      partial[ch] = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    }
    double total = 0.0;
    for (double p : partial) total += p;
    return total;
  }

  int threads_;
  GemmLibrary library_ = GemmLibrary::kOneDnn;
  std::unique_ptr<cpu::Gemm> gemms_[std::size(kGemmLibraryNames)];  // by GemmLibrary's value
  cpu::Gemm* gemm_ = nullptr;                                        // gemms_[library_]
  HostMemory memory_;  // before the scratch areas, which release into it when destroyed
  HostScratch scratch_qkv_{memory_}, scratch_y_{memory_}, scratch_dqkv_{memory_}, scratch_att_{memory_};
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads, GemmLibrary::kOneDnn); }

std::unique_ptr<Backend> make_cpu_backend(int threads, GemmLibrary library) {
  return std::make_unique<CpuBackend>(threads, library);
}

namespace {
CpuBackend& as_cpu(const Backend& backend, const char* what) {
  auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  if (!cpu) throw UsageError(std::string(what) + ": the GEMM library is a CPU backend setting, not one of " + backend.describe());
  return const_cast<CpuBackend&>(*cpu);
}
}  // namespace

GemmLibrary cpu_gemm_library(const Backend& backend) { return as_cpu(backend, "cpu_gemm_library").library(); }

void set_cpu_gemm_library(Backend& backend, GemmLibrary library) {
  if (library == GemmLibrary::kAuto) throw UsageError("set_cpu_gemm_library: auto is not a library; choose_gemm_library decides it");
  as_cpu(backend, "set_cpu_gemm_library").set_library(library);
}

}  // namespace shardtrain
