// Where one training step's time goes, kernel by kernel, on the CPU backend: the decoder at the
// foundation benchmark configuration (4 layers, d_model 256, 4 heads, seq_len 256, micro-batch 8,
// vocab 256, one thread) trained for a few steps (forward, loss, backward, AdamW) through a Backend
// that times every call it passes on. Prints one table: each kernel (matrix products by shape),
// its calls and milliseconds per step and its share of the step. The PyTorch side of the same
// comparison is bench/torch_peer.py --profile 1. docs/PERFORMANCE.md ("Per-kernel profile") has the
// command and what it measured:
//   taskset -c 0 build/bench/shardtrain_bench "[step-profile]"
// Environment: SHARDTRAIN_PROFILE_GEMM (onednn|openblas|blis, default onednn),
//              SHARDTRAIN_PROFILE_STEPS (timed steps after 2 warm-up steps, default 5).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/model/gpt.hpp"
#include "test_support.hpp"

namespace {

using shardtrain::Backend;
using Clock = std::chrono::steady_clock;

// Every op of the wrapped backend, timed (the CPU backend is synchronous, so a call's wall time is
// its kernel's time). Matrix products are keyed by their shape, the rest by name.
class TimingBackend final : public Backend {
 public:
  explicit TimingBackend(Backend& inner) : b_(inner) {}
  struct Entry {
    long calls = 0;
    double seconds = 0;
  };
  std::map<std::string, Entry> entries;
  bool enabled = false;

  shardtrain::DeviceKind device() const override { return b_.device(); }
  std::string describe() const override { return b_.describe(); }
  std::size_t attention_state_elements(std::size_t B, std::size_t NH, std::size_t T) const override {
    return b_.attention_state_elements(B, NH, T);
  }
  void* allocate_bytes(std::size_t n) override { return b_.allocate_bytes(n); }
  void release_bytes(void* p) override { b_.release_bytes(p); }
  void upload_bytes(void* d, const void* s, std::size_t n) override { time("upload", [&] { b_.upload_bytes(d, s, n); }); }
  void download_bytes(void* d, const void* s, std::size_t n) override {
    time("download", [&] { b_.download_bytes(d, s, n); });
  }
  void copy_bytes(void* d, const void* s, std::size_t n) override { time("copy", [&] { b_.copy_bytes(d, s, n); }); }
  void fill(float* x, std::size_t n, float v) override { time("fill", [&] { b_.fill(x, n, v); }); }
  void synchronize() override { b_.synchronize(); }
  void add(float* o, const float* a, const float* b, std::size_t n) override { time("add (residual)", [&] { b_.add(o, a, b, n); }); }
  void accumulate(float* y, const float* x, std::size_t n) override {
    time("accumulate (residual grad)", [&] { b_.accumulate(y, x, n); });
  }
  void scale(float* x, std::size_t n, float s) override { time("scale", [&] { b_.scale(x, n, s); }); }
  void gelu_forward(float* o, const float* i, std::size_t n) override { time("gelu forward", [&] { b_.gelu_forward(o, i, n); }); }
  void gelu_backward(float* d, const float* i, const float* g, std::size_t n) override {
    time("gelu backward", [&] { b_.gelu_backward(d, i, g, n); });
  }
  void layernorm_forward(float* o, float* m, float* r, const float* i, const float* w, const float* b, std::size_t N,
                         std::size_t C) override {
    time("layernorm forward", [&] { b_.layernorm_forward(o, m, r, i, w, b, N, C); });
  }
  void layernorm_backward(float* di, float* dw, float* db, const float* d, const float* i, const float* w,
                          const float* m, const float* r, std::size_t N, std::size_t C) override {
    time("layernorm backward", [&] { b_.layernorm_backward(di, dw, db, d, i, w, m, r, N, C); });
  }
  void matmul_forward(float* o, const float* i, const float* w, const float* b, std::size_t N, std::size_t C,
                      std::size_t OC) override {
    time("matmul forward " + shape(N, C, OC), [&] { b_.matmul_forward(o, i, w, b, N, C, OC); });
  }
  void matmul_backward(float* di, float* dw, float* db, const float* d, const float* i, const float* w,
                       std::size_t N, std::size_t C, std::size_t OC) override {
    time("matmul backward " + shape(N, C, OC), [&] { b_.matmul_backward(di, dw, db, d, i, w, N, C, OC); });
  }
  void embedding_forward(float* o, const int32_t* t, const float* wte, const float* wpe, std::size_t B, std::size_t T,
                         std::size_t C) override {
    time("embedding forward", [&] { b_.embedding_forward(o, t, wte, wpe, B, T, C); });
  }
  void embedding_backward(float* dwte, float* dwpe, const float* d, const int32_t* t, std::size_t B, std::size_t T,
                          std::size_t C) override {
    time("embedding backward", [&] { b_.embedding_backward(dwte, dwpe, d, t, B, T, C); });
  }
  void attention_forward(float* o, float* a, const float* qkv, std::size_t B, std::size_t T, std::size_t C,
                         std::size_t NH) override {
    time("attention forward", [&] { b_.attention_forward(o, a, qkv, B, T, C, NH); });
  }
  void attention_backward(float* dqkv, const float* d, const float* qkv, const float* a, std::size_t B, std::size_t T,
                          std::size_t C, std::size_t NH) override {
    time("attention backward", [&] { b_.attention_backward(dqkv, d, qkv, a, B, T, C, NH); });
  }
  void crossentropy_forward_backward(float* l, float* logits, const int32_t* t, std::size_t N, std::size_t V,
                                     float s) override {
    time("crossentropy", [&] { b_.crossentropy_forward_backward(l, logits, t, N, V, s); });
  }
  double sum_squares(const float* x, std::size_t n) override {
    double r = 0;
    time("sum_squares", [&] { r = b_.sum_squares(x, n); });
    return r;
  }
  double sum(const float* x, std::size_t n) override {
    double r = 0;
    time("sum", [&] { r = b_.sum(x, n); });
    return r;
  }
  void adamw_update(float* p, const float* g, float* m, float* v, std::size_t n,
                    const shardtrain::AdamWArgs& a) override {
    time("adamw", [&] { b_.adamw_update(p, g, m, v, n, a); });
  }

 private:
  static std::string shape(std::size_t N, std::size_t C, std::size_t OC) {
    return std::to_string(N) + "x" + std::to_string(C) + "->" + std::to_string(OC);
  }
  template <typename Fn>
  void time(const std::string& name, const Fn& fn) {
    if (!enabled) return fn();
    const auto start = Clock::now();
    fn();
    Entry& e = entries[name];
    ++e.calls;
    e.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  Backend& b_;
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

TEST_CASE("step profile: the foundation benchmark step, kernel by kernel", "[.bench][step-profile]") {
  const char* gemm = std::getenv("SHARDTRAIN_PROFILE_GEMM");
  const shardtrain::GemmLibrary library =
      shardtrain::parse_gemm_library(gemm && *gemm ? gemm : "onednn", "SHARDTRAIN_PROFILE_GEMM");
  const int steps = std::max(1, env_int("SHARDTRAIN_PROFILE_STEPS", 5));
  auto cpu = shardtrain::make_cpu_backend(1, library);
  TimingBackend timed(*cpu);
  shardtrain::ModelConfig config;  // the defaults are the foundation benchmark's model
  const int B = 8;
  shardtrain::GptModel model(timed, config, B);
  const std::size_t P = model.registry().total();
  model.set_parameters(shardtrain::test::random_floats(P, 1, -0.05f, 0.05f));
  shardtrain::DeviceArray<float> m(timed, P), v(timed, P);
  const std::vector<float> draws = shardtrain::test::random_floats(std::size_t(B) * (config.seq_len + 1), 2, 0.0f, 1.0f);
  std::vector<int32_t> tokens(draws.size());
  for (std::size_t i = 0; i < draws.size(); ++i) tokens[i] = std::min(int32_t(draws[i] * config.vocab), config.vocab - 1);
  shardtrain::AdamWArgs adam;
  adam.lr = 3e-4f;
  double step_seconds = 0;
  for (int s = 0; s < 2 + steps; ++s) {
    timed.enabled = s >= 2;
    const auto start = Clock::now();
    model.zero_grads();
    model.train_micro_batch(tokens.data(), B, 1.0f / float(B * config.seq_len));
    timed.adamw_update(model.params().data(), model.grads().data(), m.data(), v.data(), P, adam);
    if (timed.enabled) step_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  std::vector<std::pair<std::string, TimingBackend::Entry>> rows(timed.entries.begin(), timed.entries.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double kernels = 0;
  for (const auto& [name, e] : rows) kernels += e.seconds;
  std::printf("# step profile: %s, %d timed steps; step %.1f ms (kernels %.1f ms, the rest is the model's own "
              "bookkeeping)\n",
              cpu->describe().c_str(), steps, 1e3 * step_seconds / steps, 1e3 * kernels / steps);
  std::printf("%-40s %10s %12s %8s\n", "kernel", "calls/step", "ms/step", "% step");
  for (const auto& [name, e] : rows)
    std::printf("%-40s %10.1f %12.2f %7.1f%%\n", name.c_str(), double(e.calls) / steps, 1e3 * e.seconds / steps,
                100.0 * e.seconds / step_seconds);
  CHECK(step_seconds > 0);
}

// The attention kernels alone at the foundation shape (B 8, T 256, C 256, NH 4): the best of
// SHARDTRAIN_PROFILE_REPEATS (default 20) calls each, the figure least disturbed by other load on
// a shared machine (a minimum only ever loses time to interference, never gains it).
//   taskset -c 0 build/bench/shardtrain_bench "[attention-bench]"
TEST_CASE("attention bench: forward and backward at the foundation shape, best of N", "[.bench][attention-bench]") {
  const std::size_t B = 8, T = 256, C = 256, NH = 4;
  const int repeats = std::max(1, env_int("SHARDTRAIN_PROFILE_REPEATS", 20));
  auto backend = shardtrain::make_cpu_backend(1);
  auto qkv = shardtrain::test::to_device(*backend, shardtrain::test::random_floats(B * T * 3 * C, 1));
  auto dout = shardtrain::test::to_device(*backend, shardtrain::test::random_floats(B * T * C, 2));
  shardtrain::DeviceArray<float> out(*backend, B * T * C), att(*backend, backend->attention_state_elements(B, NH, T)),
      dqkv(*backend, B * T * 3 * C);
  double fwd = 1e30, bwd = 1e30;
  for (int i = 0; i < repeats + 1; ++i) {
    auto t0 = Clock::now();
    backend->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    auto t1 = Clock::now();
    backend->attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    auto t2 = Clock::now();
    if (i == 0) continue;  // warm-up
    fwd = std::min(fwd, std::chrono::duration<double>(t1 - t0).count());
    bwd = std::min(bwd, std::chrono::duration<double>(t2 - t1).count());
  }
  std::printf("# attention B%zu T%zu C%zu NH%zu on %s, best of %d: forward %.2f ms, backward %.2f ms\n", B, T, C, NH,
              backend->describe().c_str(), repeats, 1e3 * fwd, 1e3 * bwd);
  CHECK(fwd > 0);
}
