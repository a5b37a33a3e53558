// Every op of the Backend interface on the CPU backend, at 1 and at 2 threads and on every GEMM
// library the build links, against the naive double-precision reference loops of naive_kernels.hpp.
//
// For each op and thread count:
//   * random inputs (test::random_floats), awkward shapes (nothing a power of two in the small
//     case), device memory only through DeviceArray + upload/download;
//   * overwrite outputs are pre-filled with garbage (NaN on the first call, large finite values
//     on the second), "+=" outputs start from a non-zero random buffer and the reference adds to
//     that same buffer;
//   * the op runs twice on the same inputs and the two results must be bitwise identical
//     (backend.hpp's determinism promise; with different garbage in the outputs this also shows
//     the overwrite ops never read them);
//   * each output is compared with the reference in the "relative error in max norm"
//     max|got - want| / max|want|, against a per-op tolerance justified next to it. Any NaN or
//     infinity in an output counts as an infinite error.
//
// Set SHARDTRAIN_KERNEL_REPORT=1 to print every measured error (and whether the 1-thread and
// 2-thread results happen to be bitwise equal, which is promised only for the reductions).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "naive_kernels.hpp"
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "test_support.hpp"

namespace {

using shardtrain::AdamWArgs;
using shardtrain::Backend;
using shardtrain::DeviceArray;
using shardtrain::GemmLibrary;
using shardtrain::make_cpu_backend;
using shardtrain::naive::to_double;
using shardtrain::naive::to_float;
using shardtrain::naive::Vec;
using shardtrain::test::bitwise_equal;
using shardtrain::test::random_floats;
using shardtrain::test::to_device;
using shardtrain::test::to_host;
namespace nv = shardtrain::naive;

// ------------------------------------------------------------------------------ tolerances
//
// u = 2^-24 ~ 6.0e-8 is the fp32 unit roundoff; the reference is exact to ~1e-16 by comparison.
//
// kExact: ops that are one IEEE operation per element (add, accumulate, scale, the embedding's
//   wte + wpe). Every correct fp32 implementation returns the correctly rounded result, whose
//   error is <= u |want_i| <= u max|want|. 2u allows no algorithmic slack at all.
constexpr double kExact = 2.0 * 0x1.0p-24;
// kElementwise (gelu forward): a handful of fp32 operations and one tanhf per element; each
//   contributes a few u, and the result's error relative to max|out| is ~ 2e-7 at most. 1e-6.
constexpr double kElementwise = 1e-6;
// kGeluBackward: as above, except that gelu' contains 1 - tanh^2(u); with tanh computed to an
//   absolute error of ~1-2 ulp(1) ~ 1e-7, 1 - t^2 has an absolute error ~2.4e-7 wherever
//   |t| ~ 1, multiplied by 0.5|x| sqrt(2/pi)(1 + 3*0.044715 x^2), which is <= 5 for the
//   |x| <= 4 inputs used (8.7 at |x| = 5): ~1.2e-6 absolute against max|gelu'| = 1.13.
//   (A dense sweep of the CPU backend with dout = 1 measured 1.09e-6 over [-4,4] and 1.75e-6 over
//   the whole real line.) 2e-6.
constexpr double kGeluBackward = 2e-6;
// kReduction: ops whose outputs are fp32 dot products / sums of K terms (matmul with K <= 517,
//   layernorm over C <= 128 and over N <= 128 rows, softmax sums over T <= 64 or V <= 517,
//   attention's q.k over hs and att.v over T, embedding scatter sums). The worst-case bound is
//   K u sum|terms| (~3e-5 relative for K = 517); rounding errors of a fixed-order or blocked
//   fp32 sum behave like a random walk, ~ sqrt(K) u ~ 1.4e-6 for K = 517, and blocked /
//   pairwise sums (oneDNN) do better. 1e-5 is a ~10x margin on the expected error and still
//   catches any indexing, scaling or bf16/tf32-math mistake (those are >= 1e-3).
constexpr double kReduction = 1e-5;
// kAdamW: per element, ~10 fp32 operations (no reductions): a few u relative to max|x|. 1e-6.
constexpr double kAdamW = 1e-6;
// kAdamWDelta: the update p_after - p_before of one step, measured from two fp32 values, so it
//   carries the fp32 rounding of p_after (u * max|p| ~ 6e-8 for |p| < 1) relative to an update of
//   size ~lr = 0.05: ~1.2e-6, plus a few u of the update itself. 1e-5.
constexpr double kAdamWDelta = 1e-5;

// ------------------------------------------------------------------------------ shapes

struct Shape {
  std::size_t B, T, C, NH, V;
  const char* name;
};
// Small: every size awkward (hs = 20, V = 97 prime). Large: the GPT-2-like case, V = 517.
const Shape kShapes[] = {{3, 17, 60, 3, 97, "B=3 T=17 C=60 NH=3 V=97"},
                         {2, 64, 128, 4, 517, "B=2 T=64 C=128 NH=4 V=517"}};
const int kThreadCounts[] = {1, 2};
// Attention also at a T spanning several of the CPU backend's 64-row causal blocks with a ragged
// last one (400 = 6 x 64 + 16), where its 2 MiB score groups hold 3 of the 4 heads (a ragged last
// group too).
const Shape kAttentionShapes[] = {kShapes[0], kShapes[1], {2, 400, 64, 2, 97, "B=2 T=400 C=64 NH=2 V=97"}};

// ------------------------------------------------------------------------------ helpers

bool report_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SHARDTRAIN_KERNEL_REPORT");
    return v && *v && std::string(v) != "0";
  }();
  return enabled;
}

// max|got - want| / max|want| (absolute when want is all zero); +inf if got has a NaN/inf.
double rel_error(const std::vector<float>& got, const Vec& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return diff / (scale > 0.0 ? scale : 1.0);
}

// Index of the worst element, for failure messages.
std::string worst_element(const std::vector<float>& got, const Vec& want) {
  std::size_t worst = 0;
  double worst_diff = -1.0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    double d = std::isfinite(got[i]) ? std::fabs(double(got[i]) - want[i])
                                     : std::numeric_limits<double>::infinity();
    if (d > worst_diff) {
      worst_diff = d;
      worst = i;
    }
  }
  std::ostringstream s;
  if (worst < got.size() && worst < want.size())
    s << "worst at [" << worst << "]: got " << got[worst] << ", want " << want[worst];
  return s.str();
}

// Pre-fill for overwrite outputs: variant 0 = quiet NaN, variant 1 = large finite values.
std::vector<float> garbage(std::size_t n, int variant) {
  if (variant == 0) return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
  return random_floats(n, 0xBAD + unsigned(n), -1e4f, 1e4f);
}

// Tokens in [0, V) with many repeats: every 4th is token 7, every 4th (offset 1) is V-1, the
// rest uniform; token 0 appears at position 2.
std::vector<int32_t> tokens_with_repeats(std::size_t n, std::size_t V, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, int32_t(V) - 1);
  std::vector<int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 4 == 0)
      t[i] = int32_t(7 % V);
    else if (i % 4 == 1)
      t[i] = int32_t(V - 1);
    else
      t[i] = dist(gen);
  }
  if (n > 2) t[2] = 0;
  return t;
}

using Outputs = std::vector<std::vector<float>>;
struct Expected {
  std::string name;
  Vec want;
  double tol;
};
// run(backend, garbage_variant) uploads the inputs, runs the op once, downloads the outputs.
using RunFn = std::function<Outputs(Backend&, int)>;

// The common procedure: for 1 and 2 threads and every GEMM library the build links (cpu_gemm.hpp:
// each runs the products of matmul and attention, and the other ops must not care), run twice
// (bitwise equal), compare with the reference at the same tolerance.
void check_op(const std::string& label, const RunFn& run, const std::vector<Expected>& expected) {
  std::vector<Outputs> first_by_threads;  // oneDNN's, by thread count
  for (GemmLibrary library : shardtrain::linked_gemm_libraries()) {
    for (int threads : kThreadCounts) {
      auto backend = make_cpu_backend(threads, library);
      Outputs first = run(*backend, 0);
      Outputs second = run(*backend, 1);
      REQUIRE(first.size() == expected.size());
      REQUIRE(second.size() == expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const Expected& e = expected[i];
        double err = rel_error(first[i], e.want);
        INFO(label << ": output '" << e.name << "' at " << threads << " thread(s) ["
                   << backend->describe() << "]");
        INFO("relative error in max norm " << err << " (tolerance " << e.tol << "); "
                                           << worst_element(first[i], e.want));
        CHECK(first[i].size() == e.want.size());
        CHECK(bitwise_equal(first[i], second[i]));
        CHECK(err <= e.tol);
        if (report_enabled())
          std::printf("[kernels] %-58s %-8s %-8s threads=%d  err=%.3e  tol=%.1e  repeat-bitwise=%s\n",
                      label.c_str(), e.name.c_str(), shardtrain::gemm_library_name(library), threads, err, e.tol,
                      bitwise_equal(first[i], second[i]) ? "yes" : "NO");
      }
      if (library == GemmLibrary::kOneDnn) first_by_threads.push_back(std::move(first));
    }
  }
  if (report_enabled())
    for (std::size_t i = 0; i < expected.size(); ++i)
      std::printf("[kernels] %-58s %-8s 1 vs 2 threads bitwise equal: %s\n", label.c_str(),
                  expected[i].name.c_str(),
                  bitwise_equal(first_by_threads[0][i], first_by_threads[1][i]) ? "yes" : "no");
}

Vec add_vec(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

}  // namespace

// ============================================================================== memory

TEST_CASE("kernels: memory ops (allocate zeroed and aligned, upload/download, fill, copy)",
          "[kernels]") {
  for (int threads : kThreadCounts) {
    INFO(threads << " thread(s)");
    auto backend = make_cpu_backend(threads);
    Backend& be = *backend;
    const std::size_t n = 1003;
    DeviceArray<float> a(be, n);
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 64 == 0);
    std::vector<float> host = to_host(a);
    CHECK(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0f; }));

    std::vector<float> x = random_floats(n, 1);
    a.upload(x.data(), n);
    be.fill(a.data() + 3, n - 10, 2.5f);  // elements [3, n-7)
    host = to_host(a);
    for (std::size_t i = 0; i < n; ++i) {
      float want = (i >= 3 && i < n - 7) ? 2.5f : x[i];
      if (host[i] != want) FAIL_CHECK("fill: element " << i << " is " << host[i]);
    }

    DeviceArray<float> b = to_device(be, random_floats(n, 2));
    be.copy_bytes(b.data() + 5, a.data() + 1, 17 * sizeof(float));
    std::vector<float> bh = to_host(b), want_b = random_floats(n, 2);
    for (std::size_t i = 0; i < 17; ++i) want_b[5 + i] = host[1 + i];
    CHECK(bitwise_equal(bh, want_b));

    std::vector<float> part(11);
    b.download(part.data(), 11, 5);
    CHECK(std::equal(part.begin(), part.end(), want_b.begin() + 5));
    be.synchronize();
  }
}

TEST_CASE("kernels: large blocks are zeroed whether fresh or reused, huge-page aligned, and reused by size",
          "[kernels]") {
  // Blocks of 2 MiB or more come from the kernel untouched and are kept on release for the next
  // request of the same size (host_memory.hpp): a reused block must come back zeroed like a fresh one.
  auto backend = make_cpu_backend(1);
  Backend& be = *backend;
  const std::size_t n = (std::size_t(3) << 20) / sizeof(float) + 5;  // 3 MiB and a bit: rounded to 4 MiB
  const auto all_zero = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
  };
  float* first = nullptr;
  {
    DeviceArray<float> a(be, n);
    first = a.data();
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % (std::uintptr_t(2) << 20) == 0);
    CHECK(all_zero(to_host(a)));
    be.fill(a.data(), n, 7.0f);  // dirty it before it goes back
  }
  {
    DeviceArray<float> again(be, n - 3);  // the same rounded size: the block just released
    CHECK(again.data() == first);
    CHECK(all_zero(to_host(again)));
    DeviceArray<float> other(be, 2 * n);  // another size: a fresh block, zeroed too
    CHECK(other.data() != first);
    CHECK(all_zero(to_host(other)));
  }
  // Small blocks (the C allocator's) are zeroed too, after a dirty one was freed.
  {
    DeviceArray<float> s(be, 1000);
    be.fill(s.data(), 1000, 3.0f);
  }
  DeviceArray<float> s2(be, 1000);
  CHECK(all_zero(to_host(s2)));
}

// ============================================================================== elementwise

TEST_CASE("kernels: add", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    auto a = random_floats(n, 101), b = random_floats(n, 102, -3.0f, 0.5f);
    check_op(std::string("add n=") + std::to_string(n),
             [&](Backend& be, int variant) {
               auto da = to_device(be, a), db = to_device(be, b);
               auto out = to_device(be, garbage(n, variant));
               be.add(out.data(), da.data(), db.data(), n);
               return Outputs{to_host(out)};
             },
             {{"out", add_vec(to_double(a), to_double(b)), kExact}});
  }
}

TEST_CASE("kernels: accumulate (+=)", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    auto y0 = random_floats(n, 111, -2.0f, 2.0f), x = random_floats(n, 112);
    check_op(std::string("accumulate n=") + std::to_string(n),
             [&](Backend& be, int) {
               auto dy = to_device(be, y0), dx = to_device(be, x);
               be.accumulate(dy.data(), dx.data(), n);
               return Outputs{to_host(dy)};
             },
             {{"y", add_vec(to_double(y0), to_double(x)), kExact}});
  }
}

TEST_CASE("kernels: scale", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    auto x = random_floats(n, 121, -5.0f, 5.0f);
    const float factor = 0.37f;
    Vec want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = double(x[i]) * double(factor);
    check_op(std::string("scale n=") + std::to_string(n),
             [&](Backend& be, int) {
               auto dx = to_device(be, x);
               be.scale(dx.data(), n, factor);
               return Outputs{to_host(dx)};
             },
             {{"x", want, kExact}});
  }
}

TEST_CASE("kernels: gelu forward and backward", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t n = 4 * s.B * s.T * s.C + 7;
    // |x| <= 4: covers both tails of the tanh approximation and its steep middle part.
    auto in = random_floats(n, 131, -4.0f, 4.0f), dout = random_floats(n, 132);
    Vec out_ref, din_ref;
    nv::gelu_forward(out_ref, to_double(in));
    nv::gelu_backward(din_ref, to_double(in), to_double(dout));
    check_op(std::string("gelu_forward n=") + std::to_string(n),
             [&](Backend& be, int variant) {
               auto d_in = to_device(be, in);
               auto out = to_device(be, garbage(n, variant));
               be.gelu_forward(out.data(), d_in.data(), n);
               return Outputs{to_host(out)};
             },
             {{"out", out_ref, kElementwise}});
    check_op(std::string("gelu_backward n=") + std::to_string(n),
             [&](Backend& be, int variant) {
               auto d_in = to_device(be, in), d_dout = to_device(be, dout);
               auto din = to_device(be, garbage(n, variant));  // overwritten, not accumulated
               be.gelu_backward(din.data(), d_in.data(), d_dout.data(), n);
               return Outputs{to_host(din)};
             },
             {{"din", din_ref, kGeluBackward}});
  }
}

TEST_CASE("kernels: gelu of NaN is NaN, forward and backward (the trainer's non-finite check needs it)", "[kernels]") {
  // fast_exp used to cast a NaN to int32 (undefined behaviour; UBSan stopped ddp_faults' NaN run
  // in the sanitizer build): NaN must come out as NaN, through defined arithmetic.
  auto backend = make_cpu_backend(1);
  Backend& be = *backend;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {nan, 0.5f, -nan, 1e30f, -1e30f};
  const std::vector<float> dout = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  auto d_in = to_device(be, in), d_dout = to_device(be, dout);
  auto out = to_device(be, std::vector<float>(in.size(), 0.0f));
  auto din = to_device(be, std::vector<float>(in.size(), 0.0f));
  be.gelu_forward(out.data(), d_in.data(), in.size());
  be.gelu_backward(din.data(), d_in.data(), d_dout.data(), in.size());
  const auto y = to_host(out), dy = to_host(din);
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[2]));
  CHECK(std::isnan(dy[0]));
  CHECK(std::isnan(dy[2]));
  CHECK(y[1] == Approx(0.3457f).margin(1e-3));  // the finite ones untouched
  CHECK(y[3] == 1e30f);
  CHECK(y[4] == 0.0f);
}

// ============================================================================== layer norm

TEST_CASE("kernels: layernorm forward", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T, C = s.C;
    // Inputs with a non-zero mean (0.5) so the mean output is not all cancellation.
    auto in = random_floats(N * C, 141, -1.5f, 2.5f);
    auto w = random_floats(C, 142, 0.5f, 1.5f), b = random_floats(C, 143, -0.5f, 0.5f);
    Vec out, mean, rstd;
    nv::layernorm_forward(out, mean, rstd, to_double(in), to_double(w), to_double(b), N, C);
    check_op(std::string("layernorm_forward ") + s.name,
             [&](Backend& be, int variant) {
               auto d_in = to_device(be, in), dw = to_device(be, w), db = to_device(be, b);
               auto d_out = to_device(be, garbage(N * C, variant));
               auto d_mean = to_device(be, garbage(N, variant));
               auto d_rstd = to_device(be, garbage(N, variant));
               be.layernorm_forward(d_out.data(), d_mean.data(), d_rstd.data(), d_in.data(),
                                    dw.data(), db.data(), N, C);
               return Outputs{to_host(d_out), to_host(d_mean), to_host(d_rstd)};
             },
             {{"out", out, kReduction}, {"mean", mean, kReduction}, {"rstd", rstd, kReduction}});
  }
}

TEST_CASE("kernels: layernorm backward (+= into din, dweight, dbias)", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T, C = s.C;
    auto in = random_floats(N * C, 151, -1.5f, 2.5f);
    auto w = random_floats(C, 152, 0.5f, 1.5f), b = random_floats(C, 153, -0.5f, 0.5f);
    auto dout = random_floats(N * C, 154);
    // mean and rstd as the forward would hand them over (fp32); both sides consume these.
    Vec out_d, mean_d, rstd_d;
    nv::layernorm_forward(out_d, mean_d, rstd_d, to_double(in), to_double(w), to_double(b), N, C);
    auto mean = to_float(mean_d), rstd = to_float(rstd_d);
    auto din0 = random_floats(N * C, 155), dw0 = random_floats(C, 156),
         db0 = random_floats(C, 157);
    Vec din = to_double(din0), dw = to_double(dw0), db = to_double(db0);
    nv::layernorm_backward(din, dw, db, to_double(dout), to_double(in), to_double(w),
                           to_double(mean), to_double(rstd), N, C);
    check_op(std::string("layernorm_backward ") + s.name,
             [&](Backend& be, int) {
               auto d_in = to_device(be, in), d_w = to_device(be, w),
                    d_dout = to_device(be, dout), d_mean = to_device(be, mean),
                    d_rstd = to_device(be, rstd);
               auto d_din = to_device(be, din0), d_dw = to_device(be, dw0),
                    d_db = to_device(be, db0);
               be.layernorm_backward(d_din.data(), d_dw.data(), d_db.data(), d_dout.data(),
                                     d_in.data(), d_w.data(), d_mean.data(), d_rstd.data(), N, C);
               return Outputs{to_host(d_din), to_host(d_dw), to_host(d_db)};
             },
             {{"din", din, kReduction}, {"dweight", dw, kReduction}, {"dbias", db, kReduction}});
  }
}

// ============================================================================== matmul

namespace {
struct MatmulShape {
  std::size_t N, C, OC;
};
// Per model shape: qkv projection (C -> 3C), MLP projection (4C -> C), LM head (C -> V).
std::vector<MatmulShape> matmul_shapes(const Shape& s) {
  const std::size_t N = s.B * s.T;
  return {{N, s.C, 3 * s.C}, {N, 4 * s.C, s.C}, {N, s.C, s.V}};
}
std::string matmul_label(const char* op, const MatmulShape& m) {
  return std::string(op) + " N=" + std::to_string(m.N) + " C=" + std::to_string(m.C) +
         " OC=" + std::to_string(m.OC);
}
}  // namespace

TEST_CASE("kernels: matmul forward, with and without bias", "[kernels]") {
  unsigned seed = 200;
  for (const Shape& s : kShapes)
    for (const MatmulShape& m : matmul_shapes(s))
      for (bool with_bias : {true, false}) {
        auto in = random_floats(m.N * m.C, ++seed), w = random_floats(m.OC * m.C, ++seed),
             bias = random_floats(m.OC, ++seed);
        Vec want, bias_d = to_double(bias);
        nv::matmul_forward(want, to_double(in), to_double(w), with_bias ? &bias_d : nullptr, m.N,
                           m.C, m.OC);
        check_op(matmul_label("matmul_forward", m) + (with_bias ? " +bias" : " no-bias"),
                 [&](Backend& be, int variant) {
                   auto d_in = to_device(be, in), d_w = to_device(be, w),
                        d_b = to_device(be, bias);
                   auto out = to_device(be, garbage(m.N * m.OC, variant));
                   be.matmul_forward(out.data(), d_in.data(), d_w.data(),
                                     with_bias ? d_b.data() : nullptr, m.N, m.C, m.OC);
                   return Outputs{to_host(out)};
                 },
                 {{"out", want, kReduction}});
      }
}

TEST_CASE("kernels: matmul backward (din overwrite or null, dweight +=, dbias += or null)",
          "[kernels]") {
  unsigned seed = 300;
  struct Variant {
    bool din, dbias;
    const char* name;
  };
  const Variant variants[] = {{true, true, " din+dbias"},
                              {false, true, " din=null"},
                              {true, false, " dbias=null"},
                              {false, false, " din=null dbias=null"}};
  for (const Shape& s : kShapes)
    for (const MatmulShape& m : matmul_shapes(s))
      for (const Variant& var : variants) {
        auto in = random_floats(m.N * m.C, ++seed), w = random_floats(m.OC * m.C, ++seed),
             dout = random_floats(m.N * m.OC, ++seed);
        auto dw0 = random_floats(m.OC * m.C, ++seed), db0 = random_floats(m.OC, ++seed);
        Vec din, dw = to_double(dw0), db = to_double(db0);
        nv::matmul_backward(var.din ? &din : nullptr, dw, var.dbias ? &db : nullptr,
                            to_double(dout), to_double(in), to_double(w), m.N, m.C, m.OC);
        std::vector<Expected> expected;
        if (var.din) expected.push_back({"din", din, kReduction});
        expected.push_back({"dweight", dw, kReduction});
        // with dbias null the (uploaded) dbias buffer must be left exactly as it was
        expected.push_back({"dbias", db, var.dbias ? kReduction : 0.0});
        check_op(matmul_label("matmul_backward", m) + var.name,
                 [&](Backend& be, int variant) {
                   auto d_in = to_device(be, in), d_w = to_device(be, w),
                        d_dout = to_device(be, dout);
                   auto d_din = to_device(be, garbage(m.N * m.C, variant));
                   auto d_dw = to_device(be, dw0), d_db = to_device(be, db0);
                   be.matmul_backward(var.din ? d_din.data() : nullptr, d_dw.data(),
                                      var.dbias ? d_db.data() : nullptr, d_dout.data(),
                                      d_in.data(), d_w.data(), m.N, m.C, m.OC);
                   Outputs out;
                   if (var.din) out.push_back(to_host(d_din));
                   out.push_back(to_host(d_dw));
                   out.push_back(to_host(d_db));
                   return out;
                 },
                 expected);
      }
}

// ============================================================================== embeddings

TEST_CASE("kernels: embedding forward", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T;
    auto tokens = tokens_with_repeats(N, s.V, 401);
    auto wte = random_floats(s.V * s.C, 402), wpe = random_floats(s.T * s.C, 403);
    Vec want;
    nv::embedding_forward(want, tokens, to_double(wte), to_double(wpe), s.B, s.T, s.C);
    check_op(std::string("embedding_forward ") + s.name,
             [&](Backend& be, int variant) {
               auto d_tok = to_device(be, tokens);
               auto d_wte = to_device(be, wte), d_wpe = to_device(be, wpe);
               auto out = to_device(be, garbage(N * s.C, variant));
               be.embedding_forward(out.data(), d_tok.data(), d_wte.data(), d_wpe.data(), s.B,
                                    s.T, s.C);
               return Outputs{to_host(out)};
             },
             {{"out", want, kExact}});
  }
}

TEST_CASE("kernels: embedding backward (+=, repeated tokens)", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T;
    auto tokens = tokens_with_repeats(N, s.V, 411);
    auto dout = random_floats(N * s.C, 412);
    auto dwte0 = random_floats(s.V * s.C, 413), dwpe0 = random_floats(s.T * s.C, 414);
    Vec dwte = to_double(dwte0), dwpe = to_double(dwpe0);
    nv::embedding_backward(dwte, dwpe, to_double(dout), tokens, s.B, s.T, s.C);
    check_op(std::string("embedding_backward ") + s.name,
             [&](Backend& be, int) {
               auto d_tok = to_device(be, tokens);
               auto d_dout = to_device(be, dout);
               auto d_dwte = to_device(be, dwte0), d_dwpe = to_device(be, dwpe0);
               be.embedding_backward(d_dwte.data(), d_dwpe.data(), d_dout.data(), d_tok.data(),
                                     s.B, s.T, s.C);
               return Outputs{to_host(d_dwte), to_host(d_dwpe)};
             },
             {{"dwte", dwte, kReduction}, {"dwpe", dwpe, kReduction}});
  }
}

// ============================================================================== attention

TEST_CASE("kernels: attention forward (causal)", "[kernels]") {
  for (const Shape& s : kAttentionShapes) {
    const std::size_t B = s.B, T = s.T, C = s.C, NH = s.NH;
    // |qkv| < 2 gives scaled scores of order 1: softmax rows far from uniform.
    auto qkv = random_floats(B * T * 3 * C, 501, -2.0f, 2.0f);
    Vec out, att;
    nv::attention_forward(out, att, to_double(qkv), B, T, C, NH);
    check_op(std::string("attention_forward ") + s.name,
             [&](Backend& be, int variant) {
               auto d_qkv = to_device(be, qkv);
               auto d_out = to_device(be, garbage(B * T * C, variant));
               auto d_att = to_device(be, garbage(B * NH * T * T, variant));
               be.attention_forward(d_out.data(), d_att.data(), d_qkv.data(), B, T, C, NH);
               return Outputs{to_host(d_out), to_host(d_att)};
             },
             {{"out", out, kReduction}, {"att", att, kReduction}});
    // Above the diagonal att is exactly zero (not stale memory), whatever was there before.
    for (int threads : kThreadCounts) {
      auto backend = make_cpu_backend(threads);
      auto d_qkv = to_device(*backend, qkv);
      auto d_out = to_device(*backend, garbage(B * T * C, 1));
      auto d_att = to_device(*backend, garbage(B * NH * T * T, 1));
      backend->attention_forward(d_out.data(), d_att.data(), d_qkv.data(), B, T, C, NH);
      auto got = to_host(d_att);
      std::size_t nonzero = 0;
      for (std::size_t r = 0; r < B * NH * T; ++r)
        for (std::size_t t2 = r % T + 1; t2 < T; ++t2) nonzero += got[r * T + t2] != 0.0f;
      INFO(s.name << ", " << threads << " thread(s)");
      CHECK(nonzero == 0);
    }
  }
}

TEST_CASE("kernels: attention backward (causal, dqkv overwritten)", "[kernels]") {
  for (const Shape& s : kAttentionShapes) {
    const std::size_t B = s.B, T = s.T, C = s.C, NH = s.NH;
    auto qkv = random_floats(B * T * 3 * C, 511, -2.0f, 2.0f);
    auto dout = random_floats(B * T * C, 512);
    // att as the forward hands it over (fp32); both sides consume the same att.
    Vec out_d, att_d;
    nv::attention_forward(out_d, att_d, to_double(qkv), B, T, C, NH);
    auto att = to_float(att_d);
    Vec dqkv;
    nv::attention_backward(dqkv, to_double(dout), to_double(qkv), to_double(att), B, T, C, NH);
    check_op(std::string("attention_backward ") + s.name,
             [&](Backend& be, int variant) {
               auto d_qkv = to_device(be, qkv), d_dout = to_device(be, dout),
                    d_att = to_device(be, att);
               auto d_dqkv = to_device(be, garbage(B * T * 3 * C, variant));
               be.attention_backward(d_dqkv.data(), d_dout.data(), d_qkv.data(), d_att.data(), B,
                                     T, C, NH);
               return Outputs{to_host(d_dqkv)};
             },
             {{"dqkv", dqkv, kReduction}});
  }
}

// ============================================================================== cross-entropy

TEST_CASE("kernels: crossentropy forward+backward", "[kernels]") {
  for (const Shape& s : kShapes) {
    const std::size_t N = s.B * s.T, V = s.V;
    auto logits = random_floats(N * V, 601, -4.0f, 4.0f);
    auto targets = tokens_with_repeats(N, V, 602);
    // Not a power of two, as the mean over B*T rows is in training.
    const float dloss_scale = 1.0f / float(N);
    Vec losses, dlogits;
    nv::crossentropy_forward_backward(losses, dlogits, to_double(logits), targets, N, V,
                                      double(dloss_scale));
    check_op(std::string("crossentropy_forward_backward ") + s.name,
             [&](Backend& be, int variant) {
               auto d_logits = to_device(be, logits);
               auto d_targets = to_device(be, targets);
               auto d_losses = to_device(be, garbage(N, variant));
               be.crossentropy_forward_backward(d_losses.data(), d_logits.data(),
                                                d_targets.data(), N, V, dloss_scale);
               return Outputs{to_host(d_losses), to_host(d_logits)};
             },
             {{"losses", losses, kReduction}, {"dlogits", dlogits, kReduction}});
  }
}

// ============================================================================== reductions

TEST_CASE("kernels: sum and sum_squares (double, chunked, thread-count independent)",
          "[kernels]") {
  constexpr std::size_t kChunk = Backend::kReductionChunk;
  const std::size_t sizes[] = {0, 1, 1000, kChunk, 2 * kChunk, 3 * kChunk + 123,
                               10 * kChunk + 777};
  auto b1 = make_cpu_backend(1), b2 = make_cpu_backend(2);
  for (std::size_t n : sizes) {
    // Values with a non-zero mean and a wide dynamic range (every 7th scaled by 1e-6), so that
    // the double partial sums are inexact and the summation order shows in the last bits.
    auto x = random_floats(n, 700 + unsigned(n), -1.0f, 3.0f);
    for (std::size_t i = 0; i < n; i += 7) x[i] *= 1e-6f;
    const long double exact_sum = nv::accurate_sum(x), exact_sq = nv::accurate_sum_squares(x);
    const double abs_sum = nv::sum_abs(x);
    double abs_sq = 0.0;
    for (float v : x) abs_sq += double(v) * double(v);
    // Any order of double additions of n terms: |error| <= (n-1) 2^-53 sum|terms| (+ slack).
    const double bound_sum = (double(n) + 1.0) * 0x1.0p-53 * abs_sum + 1e-300;
    const double bound_sq = (double(n) + 1.0) * 0x1.0p-53 * abs_sq + 1e-300;

    double by_threads_sum[2], by_threads_sq[2];
    int idx = 0;
    for (Backend* be : {b1.get(), b2.get()}) {
      const int threads = idx + 1;
      INFO("n = " << n << ", " << threads << " thread(s)");
      auto d = to_device(*be, x);
      double s = be->sum(d.data(), n), s_again = be->sum(d.data(), n);
      double q = be->sum_squares(d.data(), n), q_again = be->sum_squares(d.data(), n);
      CHECK(std::memcmp(&s, &s_again, sizeof s) == 0);
      CHECK(std::memcmp(&q, &q_again, sizeof q) == 0);
      // Accuracy: accumulated in double (fp32 accumulation would be ~1e-7 relative, 1e5x off).
      INFO("sum " << s << " vs exact " << double(exact_sum) << ", sum_squares " << q
                  << " vs exact " << double(exact_sq));
      CHECK(std::fabs(double(s - exact_sum)) <= bound_sum);
      CHECK(std::fabs(double(q - exact_sq)) <= bound_sq);
      // (Not checked: the order of additions inside a chunk. The header's promises are the
      // fixed chunking, thread-count independence and the chunk-boundary split below.)
      // Splitting at chunk boundaries: the per-chunk results, added in order, give the whole.
      double s_pieces = 0.0, q_pieces = 0.0;
      for (std::size_t start = 0; start < n; start += kChunk) {
        std::size_t len = std::min(kChunk, n - start);
        s_pieces += be->sum(d.data() + start, len);
        q_pieces += be->sum_squares(d.data() + start, len);
      }
      CHECK(std::memcmp(&s, &s_pieces, sizeof s) == 0);
      CHECK(std::memcmp(&q, &q_pieces, sizeof q) == 0);
      by_threads_sum[idx] = s;
      by_threads_sq[idx] = q;
      if (report_enabled())
        std::printf("[kernels] sum/sum_squares n=%-6zu threads=%d  sum err=%.3e (bound %.1e)  "
                    "sum_squares err=%.3e (bound %.1e)\n",
                    n, threads, std::fabs(double(s - exact_sum)), bound_sum,
                    std::fabs(double(q - exact_sq)), bound_sq);
      ++idx;
    }
    INFO("n = " << n << ": 1 thread vs 2 threads");
    CHECK(std::memcmp(&by_threads_sum[0], &by_threads_sum[1], sizeof(double)) == 0);
    CHECK(std::memcmp(&by_threads_sq[0], &by_threads_sq[1], sizeof(double)) == 0);
  }
}

// ============================================================================== AdamW

TEST_CASE("kernels: adamw_update over several steps with bias corrections", "[kernels]") {
  const std::size_t n = 3 * Backend::kReductionChunk + 501;  // big enough to be split by threads
  const int steps = 4;
  AdamWArgs base;
  base.lr = 0.05f;
  base.beta1 = 0.9f;
  base.beta2 = 0.95f;
  base.eps = 1e-3f;  // large enough to matter for the small gradients below
  base.weight_decay = 0.1f;
  for (int threads : kThreadCounts) {
    auto backend = make_cpu_backend(threads);
    Backend& be = *backend;
    std::vector<float> p = random_floats(n, 800), m(n, 0.0f), v(n, 0.0f);
    for (int t = 1; t <= steps; ++t) {
      AdamWArgs args = base;
      args.bias_correction1 = 1.0f - std::pow(args.beta1, float(t));
      args.bias_correction2 = 1.0f - std::pow(args.beta2, float(t));
      auto g = random_floats(n, 810 + unsigned(t));
      for (std::size_t i = 0; i < n; i += 5) g[i] *= 1e-3f;  // small gradients: eps matters
      for (std::size_t i = 3; i < n; i += 11) g[i] = 0.0f;
      // Reference step from exactly the state the backend starts this step from.
      Vec p_ref = to_double(p), m_ref = to_double(m), v_ref = to_double(v);
      nv::adamw_update(p_ref, to_double(g), m_ref, v_ref, args);
      Vec delta_ref(n);
      for (std::size_t i = 0; i < n; ++i) delta_ref[i] = p_ref[i] - double(p[i]);

      auto run = [&] {
        auto dp = to_device(be, p), dg = to_device(be, g), dm = to_device(be, m),
             dv = to_device(be, v);
        be.adamw_update(dp.data(), dg.data(), dm.data(), dv.data(), n, args);
        return Outputs{to_host(dp), to_host(dm), to_host(dv)};
      };
      Outputs r1 = run(), r2 = run();
      Vec delta_got_d(n);
      for (std::size_t i = 0; i < n; ++i) delta_got_d[i] = double(r1[0][i]) - double(p[i]);
      const double e_p = rel_error(r1[0], p_ref), e_m = rel_error(r1[1], m_ref),
                   e_v = rel_error(r1[2], v_ref);
      // |delta| error: compare doubles directly (the float difference is exact in double).
      double dd = 0.0, ds = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        dd = std::max(dd, std::fabs(delta_got_d[i] - delta_ref[i]));
        ds = std::max(ds, std::fabs(delta_ref[i]));
      }
      const double e_delta = dd / ds;
      INFO("adamw step " << t << ", " << threads << " thread(s): err param " << e_p << ", m "
                         << e_m << ", v " << e_v << ", update " << e_delta);
      CHECK(bitwise_equal(r1[0], r2[0]));
      CHECK(bitwise_equal(r1[1], r2[1]));
      CHECK(bitwise_equal(r1[2], r2[2]));
      CHECK(e_p <= kAdamW);
      CHECK(e_m <= kAdamW);
      CHECK(e_v <= kAdamW);
      CHECK(e_delta <= kAdamWDelta);
      if (report_enabled())
        std::printf("[kernels] adamw step %d threads=%d  err param=%.3e m=%.3e v=%.3e "
                    "update=%.3e\n",
                    t, threads, e_p, e_m, e_v, e_delta);
      p = r1[0];
      m = r1[1];
      v = r1[2];
    }
  }
}
