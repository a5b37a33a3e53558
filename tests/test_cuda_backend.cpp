// The CUDA backend against the CPU backend, op by op ([gpu]: run through the gate in main.cpp,
// which exits 77 = skipped where no CUDA device is visible), plus the factory's error contract
// ([cuda]: runs in every build, with or without a device).
//
// Only the Backend interface is used (make_cuda_backend exists in CPU-only builds too, where it
// throws UsageError), so this file compiles in every build without #ifdefs.
//
// For each op:
//   * the same random inputs (test::random_floats, fixed seeds) go to make_cpu_backend(1) and
//     make_cuda_backend(0); shapes are odd (B=3, T=17, C=60, NH=3, V=97, plus a second, larger
//     shape where a kernel strides: T=67 > one warp, C=301 > one 128-thread block, V=1031);
//   * overwrite outputs on the GPU start as NaN (so an op that read them would show), "+=" outputs
//     start from the same non-zero random buffer on both backends;
//   * the GPU op runs twice from identical state and the two results must be bitwise identical
//     (backend.hpp's determinism promise: no float atomics, fixed reduction orders);
//   * GPU and CPU results are compared in the relative error in max norm,
//     max|gpu - cpu| / max|cpu|, against a per-op tolerance justified next to it. A NaN or
//     infinity anywhere fails.
//
// Tolerances, in general: fp32 unit roundoff is u = 2^-24 ~ 6e-8. Ops with one rounding per
// element (add, accumulate, scale, embedding forward) and ops where both backends perform the
// same sequence of float additions (embedding backward) must agree bitwise. Elementwise ops
// with libm calls (tanhf/expf: the CPU uses its own polynomial exp, < 2 ulp; CUDA's expf/tanhf
// are <= 2 ulp) and FMA contraction differences (both compilers may fuse a*b+c, differently)
// agree to a few ulp of O(1) values: 2e-6. Reductions over K terms in different orders differ by
// at most ~K u relative to sum|terms|, typically sqrt(K) u; with K <= 301 here that is <= 2e-5
// in the worst case and ~1e-6 typically, relative to the max norm: 1e-5 for one level of
// products / reductions (matmul, LayerNorm, softmax), 5e-5 for attention backward (three
// dependent products plus the softmax Jacobian, whose (datt - dot) difference cancels; the fused
// attention states its own, wider ones next to its test).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/bf16.hpp"
#include "shardtrain/base/error.hpp"
#include "test_support.hpp"

namespace {

using shardtrain::AdamWArgs;
using shardtrain::Backend;
using shardtrain::DeviceArray;
using shardtrain::test::bitwise_equal;
using shardtrain::test::random_floats;
using shardtrain::test::to_device;
using shardtrain::test::to_host;

// Both backends; declared first in each test so that every DeviceArray is released before them.
struct Backends {
  std::unique_ptr<Backend> cpu = shardtrain::make_cpu_backend(1);
  std::unique_ptr<Backend> gpu = shardtrain::make_cuda_backend(0);
};

std::vector<float> nans(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

std::vector<int32_t> random_tokens(std::size_t n, int32_t vocab, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> out(n);
  for (auto& t : out) t = dist(gen);
  return out;
}

bool all_finite(const std::vector<float>& x) {
  return std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
}

// max|got - want| / max|want|, infinite when anything is not finite.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size() || !all_finite(got) || !all_finite(want))
    return std::numeric_limits<double>::infinity();
  return shardtrain::test::max_norm_relative_error(got, want);
}

void check_close(const std::string& what, const std::vector<float>& gpu,
                 const std::vector<float>& cpu, double tolerance) {
  const double err = relative_error(gpu, cpu);
  INFO(what << ": relative error in max norm " << err << " (tolerance " << tolerance << ")");
  CHECK(err <= tolerance);
}

void check_bitwise(const std::string& what, const std::vector<float>& a,
                   const std::vector<float>& b) {
  INFO(what << ": must be bitwise equal");
  CHECK(bitwise_equal(a, b));
}

struct AttnShape {
  std::size_t B, T, C, NH;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Runs everywhere: the factory's contract, with or without the CUDA backend or a device.

TEST_CASE("cuda backend factory: availability never throws, bad indices are usage errors",
          "[cuda]") {
  bool available = false;
  REQUIRE_NOTHROW(available = shardtrain::cuda_backend_available());
  for (int index : {-1, 1 << 20}) {
    INFO("device index " << index);
    try {
      auto backend = shardtrain::make_cuda_backend(index);
      FAIL("make_cuda_backend(" << index << ") returned a backend");
    } catch (const shardtrain::UsageError& e) {
      const std::string message = e.what();
      // A CPU-only build says the backend is missing; a CUDA build names the index.
      if (available) CHECK(message.find(std::to_string(index)) != std::string::npos);
      CHECK(e.code() == shardtrain::ExitCode::kUsage);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// [gpu]: CUDA against CPU.

TEST_CASE("cuda backend: identity, memory, transfers and fill", "[gpu]") {
  Backends be;
  CHECK(be.gpu->device() == shardtrain::DeviceKind::kCuda);
  const std::string description = be.gpu->describe();
  INFO("describe(): " << description);
  CHECK(description.rfind("cuda (device 0: ", 0) == 0);
  CHECK(description.find("cuBLAS") != std::string::npos);

  // Fresh memory is zeroed and 64-byte aligned (pointer values only; never dereferenced here).
  const std::size_t odd_bytes = 1001;
  void* raw = be.gpu->allocate_bytes(odd_bytes);
  REQUIRE(raw != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(raw) % 64 == 0);
  std::vector<unsigned char> bytes(odd_bytes, 0xAB);
  be.gpu->download_bytes(bytes.data(), raw, odd_bytes);
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; }));
  // Odd-sized upload/download round trip, at an odd byte offset.
  std::vector<unsigned char> pattern(odd_bytes - 3);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 37 + 11);
  be.gpu->upload_bytes(static_cast<unsigned char*>(raw) + 3, pattern.data(), pattern.size());
  std::vector<unsigned char> back(pattern.size());
  be.gpu->download_bytes(back.data(), static_cast<unsigned char*>(raw) + 3, back.size());
  CHECK(back == pattern);
  be.gpu->release_bytes(raw);
  be.gpu->release_bytes(nullptr);  // a no-op, like free(nullptr)

  // copy_bytes between sub-ranges, then fill, in queue order; synchronize then download.
  const std::size_t n = 1037;
  const auto x = random_floats(n, 11);
  auto src = to_device(*be.gpu, x);
  DeviceArray<float> dst(*be.gpu, n);
  CHECK(to_host(dst) == std::vector<float>(n, 0.0f));
  be.gpu->copy_bytes(dst.data() + 5, src.data() + 7, (n - 7) * sizeof(float));
  be.gpu->fill(dst.data(), 5, -2.5f);
  be.gpu->synchronize();
  const auto got = to_host(dst);
  std::vector<float> want(n, 0.0f);
  std::fill(want.begin(), want.begin() + 5, -2.5f);
  std::copy(x.begin() + 7, x.end(), want.begin() + 5);
  check_bitwise("copy_bytes + fill", got, want);
}

TEST_CASE("cuda backend: elementwise ops match the cpu backend", "[gpu]") {
  Backends be;
  const std::size_t n = 1001;
  const auto a = random_floats(n, 21, -4.0f, 4.0f);
  const auto b = random_floats(n, 22, -4.0f, 4.0f);
  const float s = 0.7310f;

  // One IEEE fp32 rounding per element on both backends: bitwise equal.
  auto run = [&](Backend& backend, int op) {
    auto da = to_device(backend, a);
    auto db = to_device(backend, b);
    auto out = to_device(backend, nans(n));
    switch (op) {
      case 0: backend.add(out.data(), da.data(), db.data(), n); return to_host(out);
      case 1: backend.accumulate(da.data(), db.data(), n); return to_host(da);
      case 2: backend.scale(da.data(), n, s); return to_host(da);
      case 3: backend.gelu_forward(out.data(), da.data(), n); return to_host(out);
      default: backend.gelu_backward(out.data(), da.data(), db.data(), n); return to_host(out);
    }
  };
  const char* names[] = {"add", "accumulate", "scale", "gelu_forward", "gelu_backward"};
  for (int op = 0; op < 5; ++op) {
    const auto cpu = run(*be.cpu, op);
    const auto gpu = run(*be.gpu, op);
    check_bitwise(std::string(names[op]) + " (gpu run twice)", gpu, run(*be.gpu, op));
    if (op < 3) {
      check_bitwise(names[op], gpu, cpu);
    } else {
      // tanh-GELU: CPU tanh is 1 - 2/(exp(2u)+1) with its own exp (~1e-7 absolute), CUDA's
      // tanhf is <= 2 ulp; outputs are O(1..4) (gelu) and O(1) times dout (gelu'): a few ulp,
      // 2e-6 relative to the max norm.
      check_close(names[op], gpu, cpu, 2e-6);
    }
  }
}

TEST_CASE("cuda backend: layernorm forward and backward match the cpu backend", "[gpu]") {
  Backends be;
  // (rows, channels): odd; C=301 makes each 128-thread block stride; 51 rows = two 32-row chunks
  // in the dweight/dbias reduction.
  const std::pair<std::size_t, std::size_t> shapes[] = {{51, 60}, {37, 301}};
  for (const auto& shape : shapes) {
    const std::size_t N = shape.first, C = shape.second;  // not a structured binding: clang 14 cannot capture one
    INFO("rows " << N << ", channels " << C);
    const auto in = random_floats(N * C, 31, -2.0f, 3.0f);
    const auto w = random_floats(C, 32, 0.5f, 1.5f);
    const auto bias = random_floats(C, 33);
    const auto dout = random_floats(N * C, 34);
    const auto din0 = random_floats(N * C, 35);
    const auto dw0 = random_floats(C, 36);
    const auto db0 = random_floats(C, 37);
    struct Result {
      std::vector<float> out, mean, rstd, din, dw, db;
    };
    auto run = [&](Backend& backend) {
      auto d_in = to_device(backend, in);
      auto d_w = to_device(backend, w);
      auto d_b = to_device(backend, bias);
      auto d_out = to_device(backend, nans(N * C));
      auto d_mean = to_device(backend, nans(N));
      auto d_rstd = to_device(backend, nans(N));
      backend.layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_in.data(), d_w.data(),
                                d_b.data(), N, C);
      auto d_dout = to_device(backend, dout);
      auto d_din = to_device(backend, din0);
      auto d_dw = to_device(backend, dw0);
      auto d_db = to_device(backend, db0);
      backend.layernorm_backward(d_din.data(), d_dw.data(), d_db.data(), d_dout.data(), d_in.data(),
                                 d_w.data(), d_mean.data(), d_rstd.data(), N, C);
      return Result{to_host(d_out), to_host(d_mean), to_host(d_rstd),
                    to_host(d_din), to_host(d_dw),   to_host(d_db)};
    };
    const Result cpu = run(*be.cpu), gpu = run(*be.gpu), again = run(*be.gpu);
    check_bitwise("layernorm out (gpu run twice)", gpu.out, again.out);
    check_bitwise("layernorm mean (gpu run twice)", gpu.mean, again.mean);
    check_bitwise("layernorm rstd (gpu run twice)", gpu.rstd, again.rstd);
    check_bitwise("layernorm din (gpu run twice)", gpu.din, again.din);
    check_bitwise("layernorm dweight (gpu run twice)", gpu.dw, again.dw);
    check_bitwise("layernorm dbias (gpu run twice)", gpu.db, again.db);
    // Row sums of C <= 301 terms in different orders (CPU: SIMD lanes; GPU: 128-thread tree),
    // then one normalisation: 1e-5 (see the header comment).
    check_close("layernorm out", gpu.out, cpu.out, 1e-5);
    check_close("layernorm mean", gpu.mean, cpu.mean, 1e-5);
    check_close("layernorm rstd", gpu.rstd, cpu.rstd, 1e-5);
    check_close("layernorm din", gpu.din, cpu.din, 1e-5);
    // Column sums over N <= 51 rows (CPU: sequential; GPU: 32-row partials, then in order).
    check_close("layernorm dweight", gpu.dw, cpu.dw, 1e-5);
    check_close("layernorm dbias", gpu.db, cpu.db, 1e-5);
  }
}

TEST_CASE("cuda backend: matmul forward and backward match the cpu backend", "[gpu]") {
  Backends be;
  // (N, C, OC): the qkv and MLP shapes of C=60, and a reduction dimension K up to 240.
  const std::size_t shapes[][3] = {{51, 60, 180}, {51, 240, 60}, {37, 61, 97}};
  for (const auto& shape : shapes) {
    const std::size_t N = shape[0], C = shape[1], OC = shape[2];
    for (bool with_optional : {true, false}) {
      INFO("N " << N << ", C " << C << ", OC " << OC << (with_optional ? ", bias/din/dbias" : ", no bias/din/dbias"));
      const auto in = random_floats(N * C, 41);
      const auto w = random_floats(OC * C, 42, -0.2f, 0.2f);
      const auto bias = random_floats(OC, 43);
      const auto dout = random_floats(N * OC, 44);
      const auto dw0 = random_floats(OC * C, 45);
      const auto db0 = random_floats(OC, 46);
      struct Result {
        std::vector<float> out, din, dw, db;
      };
      auto run = [&](Backend& backend) {
        auto d_in = to_device(backend, in);
        auto d_w = to_device(backend, w);
        auto d_bias = to_device(backend, bias);
        auto d_out = to_device(backend, nans(N * OC));
        backend.matmul_forward(d_out.data(), d_in.data(), d_w.data(),
                               with_optional ? d_bias.data() : nullptr, N, C, OC);
        auto d_dout = to_device(backend, dout);
        auto d_din = to_device(backend, nans(N * C));
        auto d_dw = to_device(backend, dw0);
        auto d_db = to_device(backend, db0);
        backend.matmul_backward(with_optional ? d_din.data() : nullptr, d_dw.data(),
                                with_optional ? d_db.data() : nullptr, d_dout.data(), d_in.data(),
                                d_w.data(), N, C, OC);
        return Result{to_host(d_out), to_host(d_din), to_host(d_dw), to_host(d_db)};
      };
      const Result cpu = run(*be.cpu), gpu = run(*be.gpu), again = run(*be.gpu);
      check_bitwise("matmul out (gpu run twice)", gpu.out, again.out);
      check_bitwise("matmul dweight (gpu run twice)", gpu.dw, again.dw);
      // fp32 dot products of K <= 240 terms, blocked differently by oneDNN and cuBLAS (pedantic
      // fp32, no TF32): 1e-5 relative in max norm.
      check_close("matmul out", gpu.out, cpu.out, 1e-5);
      check_close("matmul dweight (+=)", gpu.dw, cpu.dw, 1e-5);
      if (with_optional) {
        check_bitwise("matmul din (gpu run twice)", gpu.din, again.din);
        check_bitwise("matmul dbias (gpu run twice)", gpu.db, again.db);
        check_close("matmul din", gpu.din, cpu.din, 1e-5);
        check_close("matmul dbias (+=)", gpu.db, cpu.db, 1e-5);
      } else {
        // Skipped outputs are untouched.
        CHECK(std::all_of(gpu.din.begin(), gpu.din.end(), [](float v) { return std::isnan(v); }));
        check_bitwise("matmul dbias untouched", gpu.db, db0);
      }
    }
  }
}

TEST_CASE("cuda backend: embedding forward and backward match the cpu backend", "[gpu]") {
  Backends be;
  const std::size_t B = 3, T = 17, C = 60, V = 97, N = B * T;
  auto tokens = random_tokens(N, static_cast<int32_t>(V), 51);
  // Make sure tokens repeat (within a sequence and across sequences) and the extremes occur.
  tokens[1] = tokens[0];
  tokens[T + 4] = tokens[0];
  tokens[2 * T + 16] = tokens[0];
  tokens[5] = 0;
  tokens[6] = static_cast<int32_t>(V - 1);
  const auto wte = random_floats(V * C, 52);
  const auto wpe = random_floats(T * C, 53);
  const auto dout = random_floats(N * C, 54);
  const auto dwte0 = random_floats(V * C, 55);
  const auto dwpe0 = random_floats(T * C, 56);
  struct Result {
    std::vector<float> out, dwte, dwpe;
  };
  auto run = [&](Backend& backend) {
    auto d_tok = to_device(backend, tokens);
    auto d_wte = to_device(backend, wte);
    auto d_wpe = to_device(backend, wpe);
    auto d_out = to_device(backend, nans(N * C));
    backend.embedding_forward(d_out.data(), d_tok.data(), d_wte.data(), d_wpe.data(), B, T, C);
    auto d_dout = to_device(backend, dout);
    auto d_dwte = to_device(backend, dwte0);
    auto d_dwpe = to_device(backend, dwpe0);
    backend.embedding_backward(d_dwte.data(), d_dwpe.data(), d_dout.data(), d_tok.data(), B, T, C);
    return Result{to_host(d_out), to_host(d_dwte), to_host(d_dwpe)};
  };
  const Result cpu = run(*be.cpu), gpu = run(*be.gpu), again = run(*be.gpu);
  check_bitwise("embedding dwte (gpu run twice)", gpu.dwte, again.dwte);
  check_bitwise("embedding dwpe (gpu run twice)", gpu.dwpe, again.dwpe);
  // Forward: one addition per element. Backward: both backends add the dout rows into each
  // dwte/dwpe element in increasing position order, starting from its old value (the GPU via a
  // stable token sort), so even the "+=" sums are the same float operations: bitwise.
  check_bitwise("embedding out", gpu.out, cpu.out);
  check_bitwise("embedding dwte (+=)", gpu.dwte, cpu.dwte);
  check_bitwise("embedding dwpe (+=)", gpu.dwpe, cpu.dwpe);
}

TEST_CASE("cuda backend: fused attention forward and backward match the cpu backend", "[gpu]") {
  Backends be;
  // T=17 (one row block, one key tile) and T=67 (two row blocks of 64, three key tiles of 32) at
  // hs = 20 and 12 (the 32-wide kernel with padding columns); T=130 at hs = 64 and T=40 at hs = 128
  // (the 64- and 128-wide kernels).
  const AttnShape shapes[] = {{3, 17, 60, 3}, {2, 67, 60, 5}, {1, 130, 128, 2}, {2, 40, 256, 2}};
  for (const auto& s : shapes) {
    const std::size_t B = s.B, T = s.T, C = s.C, NH = s.NH;
    INFO("B " << B << ", T " << T << ", C " << C << ", NH " << NH);
    // The fused kernels keep one float per (b, h, query row), never a (T,T) matrix.
    REQUIRE(be.gpu->attention_state_elements(B, NH, T) == B * NH * T);
    const auto qkv = random_floats(B * T * 3 * C, 61, -1.5f, 1.5f);
    const auto dout = random_floats(B * T * C, 62);
    struct Result {
      std::vector<float> out, dqkv;
    };
    auto run = [&](Backend& backend) {
      auto d_qkv = to_device(backend, qkv);
      auto d_out = to_device(backend, nans(B * T * C));
      auto d_state = to_device(backend, nans(backend.attention_state_elements(B, NH, T)));
      backend.attention_forward(d_out.data(), d_state.data(), d_qkv.data(), B, T, C, NH);
      auto d_dout = to_device(backend, dout);
      auto d_dqkv = to_device(backend, nans(B * T * 3 * C));
      backend.attention_backward(d_dqkv.data(), d_dout.data(), d_qkv.data(), d_state.data(), B, T, C, NH);
      return Result{to_host(d_out), to_host(d_dqkv)};
    };
    const Result cpu = run(*be.cpu), gpu = run(*be.gpu), again = run(*be.gpu);
    check_bitwise("attention out (gpu run twice)", gpu.out, again.out);
    check_bitwise("attention dqkv (gpu run twice)", gpu.dqkv, again.dqkv);
    // Forward: hs-term score dot products, then an online softmax that rescales its running sums
    // once per 32-key tile (<= 5 tiles here: a few extra roundings) and a T-term weighted sum of v:
    // ~T u relative to sum |p v| in the worst case (T <= 130: 8e-6): 2e-5. Backward recomputes
    // p = exp(s - lse) (relative error ~|s| u), then the three products and the softmax Jacobian
    // (dp - delta) whose difference cancels, as the unfused backward did at 5e-5: 1e-4.
    check_close("attention out", gpu.out, cpu.out, 2e-5);
    check_close("attention dqkv", gpu.dqkv, cpu.dqkv, 1e-4);
  }
}

TEST_CASE("cuda backend: bf16 matmuls equal fp32 products of the bf16-rounded operands", "[gpu]") {
  // Reference: the CPU backend (fp32) on the operands rounded to bf16 on the host
  // (shardtrain/backend/bf16.hpp, the rounding the device applies), so the only difference left is
  // the order of the fp32 accumulation: 1e-5 relative in max norm, as for the fp32 products. dbias
  // is a column sum of the unrounded fp32 dout in both.
  auto cpu = shardtrain::make_cpu_backend(1);
  auto gpu = shardtrain::make_cuda_backend(0, shardtrain::Precision::kBf16);
  REQUIRE(gpu->precision() == shardtrain::Precision::kBf16);
  auto rounded = [](std::vector<float> x) {
    for (float& v : x) v = shardtrain::round_to_bf16(v);
    return x;
  };
  const std::size_t shapes[][3] = {{51, 60, 180}, {37, 61, 97}, {256, 768, 2304}};
  for (const auto& shape : shapes) {
    const std::size_t N = shape[0], C = shape[1], OC = shape[2];
    INFO("N " << N << ", C " << C << ", OC " << OC);
    const auto in = random_floats(N * C, 141);
    const auto w = random_floats(OC * C, 142, -0.2f, 0.2f);
    const auto bias = random_floats(OC, 143);
    const auto dout = random_floats(N * OC, 144);
    const auto dw0 = random_floats(OC * C, 145);
    const auto db0 = random_floats(OC, 146);
    struct Result {
      std::vector<float> out, din, dw, db;
    };
    // `shift` floats in front of the "+=" dweight: a gradient tensor at an odd offset of a flat
    // buffer (4-byte aligned only), which cuBLASLt must accept.
    auto run = [&](Backend& backend, const std::vector<float>& x, const std::vector<float>& weight,
                   const std::vector<float>& g, std::size_t shift = 0) {
      auto d_in = to_device(backend, x);
      auto d_w = to_device(backend, weight);
      auto d_bias = to_device(backend, bias);
      auto d_out = to_device(backend, nans(N * OC));
      backend.matmul_forward(d_out.data(), d_in.data(), d_w.data(), d_bias.data(), N, C, OC);
      auto d_dout = to_device(backend, g);
      auto d_din = to_device(backend, nans(N * C));
      std::vector<float> dw_shifted(shift, 0.0f);
      dw_shifted.insert(dw_shifted.end(), dw0.begin(), dw0.end());
      auto d_dw = to_device(backend, dw_shifted);
      auto d_db = to_device(backend, db0);
      backend.matmul_backward(d_din.data(), d_dw.data() + shift, d_db.data(), d_dout.data(), d_in.data(), d_w.data(),
                              N, C, OC);
      auto dw = to_host(d_dw);
      dw.erase(dw.begin(), dw.begin() + std::ptrdiff_t(shift));
      return Result{to_host(d_out), to_host(d_din), dw, to_host(d_db)};
    };
    const Result device = run(*gpu, in, w, dout), again = run(*gpu, in, w, dout);
    const Result shifted = run(*gpu, in, w, dout, 1);
    const Result reference = run(*cpu, rounded(in), rounded(w), rounded(dout));
    const Result fp32 = run(*cpu, in, w, dout);
    check_bitwise("bf16 out (run twice)", device.out, again.out);
    check_bitwise("bf16 din (run twice)", device.din, again.din);
    check_bitwise("bf16 dweight (run twice)", device.dw, again.dw);
    check_close("bf16 out", device.out, reference.out, 1e-5);
    check_close("bf16 din", device.din, reference.din, 1e-5);
    check_close("bf16 dweight (+=)", device.dw, reference.dw, 1e-5);
    // (cuBLASLt may pick another algorithm for the lesser alignment: close, not necessarily bitwise.)
    check_close("bf16 dweight at a 4-byte aligned offset", shifted.dw, reference.dw, 1e-5);
    check_close("bf16 dbias (+=, fp32 dout)", device.db, fp32.db, 1e-5);
    // And the products really were bf16: against fp32 products of the unrounded operands the
    // error is that of bf16 rounding (operands off by up to 2^-9 relative: ~1e-3), far above 1e-4.
    CHECK(relative_error(device.out, fp32.out) > 1e-4);
  }
}

TEST_CASE("cuda backend: crossentropy forward/backward matches the cpu backend", "[gpu]") {
  Backends be;
  // V=97 (< one 256-thread block) and V=1031 (threads stride).
  const std::pair<std::size_t, std::size_t> shapes[] = {{51, 97}, {23, 1031}};
  for (const auto& shape : shapes) {
    const auto N = shape.first;  // not a structured binding: clang 14 cannot capture one
    const auto V = shape.second;
    INFO("rows " << N << ", vocab " << V);
    const auto logits = random_floats(N * V, 71, -4.0f, 4.0f);
    auto targets = random_tokens(N, static_cast<int32_t>(V), 72);
    targets[0] = 0;
    targets[1] = static_cast<int32_t>(V - 1);
    const float dloss_scale = 1.0f / static_cast<float>(N);
    struct Result {
      std::vector<float> losses, dlogits;
    };
    auto run = [&](Backend& backend) {
      auto d_logits = to_device(backend, logits);
      auto d_targets = to_device(backend, targets);
      auto d_losses = to_device(backend, nans(N));
      backend.crossentropy_forward_backward(d_losses.data(), d_logits.data(), d_targets.data(), N, V,
                                            dloss_scale);
      return Result{to_host(d_losses), to_host(d_logits)};
    };
    const Result cpu = run(*be.cpu), gpu = run(*be.gpu), again = run(*be.gpu);
    check_bitwise("crossentropy losses (gpu run twice)", gpu.losses, again.losses);
    check_bitwise("crossentropy dlogits (gpu run twice)", gpu.dlogits, again.dlogits);
    // Row max, exp (CPU polynomial vs CUDA expf, both <= 2 ulp) and a V-term sum (V <= 1031:
    // typically sqrt(V) u ~ 2e-6) then log: 1e-5 relative to the max norm (losses ~ log V).
    check_close("crossentropy losses", gpu.losses, cpu.losses, 1e-5);
    // dlogits = scale * (p - onehot): max norm ~ scale (the target entries), errors ~ scale * u.
    check_close("crossentropy dlogits", gpu.dlogits, cpu.dlogits, 1e-5);
  }
}

TEST_CASE("cuda backend: chunked sums and sums of squares equal the cpu backend's", "[gpu]") {
  Backends be;
  constexpr std::size_t kChunk = Backend::kReductionChunk;
  for (std::size_t n : {std::size_t{1}, std::size_t{100}, 2 * kChunk, 3 * kChunk + 123}) {
    INFO("n " << n);
    auto x = random_floats(n, 81, -3.0f, 5.0f);
    auto d_cpu = to_device(*be.cpu, x);
    auto d_gpu = to_device(*be.gpu, x);
    for (bool squares : {false, true}) {
      INFO((squares ? "sum_squares" : "sum"));
      auto op = [&](Backend& backend, const float* p, std::size_t count) {
        return squares ? backend.sum_squares(p, count) : backend.sum(p, count);
      };
      const double cpu = op(*be.cpu, d_cpu.data(), n);
      const double gpu = op(*be.gpu, d_gpu.data(), n);
      CHECK(gpu == op(*be.gpu, d_gpu.data(), n));
      // The CUDA kernel applies the CPU backend's exact per-chunk rule (8 interleaved double
      // lanes per 4096-element chunk, fixed combination, chunk sums added in order from 0.0;
      // every step a correctly rounded double operation), so the values must be bitwise equal.
      // Should the rules ever diverge, the first check still bounds the difference by the worst
      // case of any summation order: n * 2^-53 * sum|terms| (n <= 12411: < 1.4e-12).
      double magnitude = 0.0;
      for (float v : x) magnitude += squares ? double(v) * double(v) : std::fabs(double(v));
      CHECK(std::fabs(gpu - cpu) <= 2e-12 * magnitude);
      CHECK(gpu == cpu);
      // Splitting before the last chunk: (all full chunks) + (last chunk) is the same value,
      // since chunk sums are added in order.
      const std::size_t last = (n - 1) / kChunk * kChunk;
      if (last > 0)
        CHECK(op(*be.gpu, d_gpu.data(), last) + op(*be.gpu, d_gpu.data() + last, n - last) == gpu);
    }
  }
  CHECK(be.gpu->sum(nullptr, 0) == 0.0);
  CHECK(be.gpu->sum_squares(nullptr, 0) == 0.0);
}

TEST_CASE("cuda backend: adamw update matches the cpu backend", "[gpu]") {
  Backends be;
  const std::size_t n = 1001;
  const auto p0 = random_floats(n, 91);
  const auto m0 = random_floats(n, 92, -0.01f, 0.01f);
  const auto v0 = random_floats(n, 93, 0.0f, 1e-4f);
  struct Result {
    std::vector<float> p, m, v;
  };
  auto run = [&](Backend& backend) {
    auto d_p = to_device(backend, p0);
    auto d_m = to_device(backend, m0);
    auto d_v = to_device(backend, v0);
    for (int step = 1; step <= 3; ++step) {
      auto d_g = to_device(backend, random_floats(n, 100 + step, -0.05f, 0.05f));
      AdamWArgs args;
      args.lr = 3e-3f;
      args.weight_decay = 0.1f;
      args.bias_correction1 = 1.0f - std::pow(args.beta1, static_cast<float>(step));
      args.bias_correction2 = 1.0f - std::pow(args.beta2, static_cast<float>(step));
      backend.adamw_update(d_p.data(), d_g.data(), d_m.data(), d_v.data(), n, args);
    }
    return Result{to_host(d_p), to_host(d_m), to_host(d_v)};
  };
  const Result cpu = run(*be.cpu), gpu = run(*be.gpu), again = run(*be.gpu);
  check_bitwise("adamw param (gpu run twice)", gpu.p, again.p);
  // The same expression on both backends up to FMA contraction (compiler-chosen on both):
  // a few ulp per step on O(1) params and on the moments: 1e-6.
  check_close("adamw param", gpu.p, cpu.p, 1e-6);
  check_close("adamw exp_avg", gpu.m, cpu.m, 1e-6);
  check_close("adamw exp_avg_sq", gpu.v, cpu.v, 1e-6);
}
