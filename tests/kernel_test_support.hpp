// What the kernel tests share (test_kernels_*.cpp): the tolerances and why, the shapes, and
// check_op, the one procedure every op goes through.
//
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
#pragma once
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

namespace kernel_test {


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
inline constexpr double kExact = 2.0 * 0x1.0p-24;
// kElementwise (gelu forward): a handful of fp32 operations and one tanhf per element; each
//   contributes a few u, and the result's error relative to max|out| is ~ 2e-7 at most. 1e-6.
inline constexpr double kElementwise = 1e-6;
// kGeluBackward: as above, except that gelu' contains 1 - tanh^2(u); with tanh computed to an
//   absolute error of ~1-2 ulp(1) ~ 1e-7, 1 - t^2 has an absolute error ~2.4e-7 wherever
//   |t| ~ 1, multiplied by 0.5|x| sqrt(2/pi)(1 + 3*0.044715 x^2), which is <= 5 for the
//   |x| <= 4 inputs used (8.7 at |x| = 5): ~1.2e-6 absolute against max|gelu'| = 1.13.
//   (A dense sweep of the CPU backend with dout = 1 measured 1.09e-6 over [-4,4] and 1.75e-6 over
//   the whole real line.) 2e-6.
inline constexpr double kGeluBackward = 2e-6;
// kReduction: ops whose outputs are fp32 dot products / sums of K terms (matmul with K <= 517,
//   layernorm over C <= 128 and over N <= 128 rows, softmax sums over T <= 64 or V <= 517,
//   attention's q.k over hs and att.v over T, embedding scatter sums). The worst-case bound is
//   K u sum|terms| (~3e-5 relative for K = 517); rounding errors of a fixed-order or blocked
//   fp32 sum behave like a random walk, ~ sqrt(K) u ~ 1.4e-6 for K = 517, and blocked /
//   pairwise sums (oneDNN) do better. 1e-5 is a ~10x margin on the expected error and still
//   catches any indexing, scaling or bf16/tf32-math mistake (those are >= 1e-3).
inline constexpr double kReduction = 1e-5;
// kAdamW: per element, ~10 fp32 operations (no reductions): a few u relative to max|x|. 1e-6.
inline constexpr double kAdamW = 1e-6;
// kAdamWDelta: the update p_after - p_before of one step, measured from two fp32 values, so it
//   carries the fp32 rounding of p_after (u * max|p| ~ 6e-8 for |p| < 1) relative to an update of
//   size ~lr = 0.05: ~1.2e-6, plus a few u of the update itself. 1e-5.
inline constexpr double kAdamWDelta = 1e-5;

// ------------------------------------------------------------------------------ shapes

struct Shape {
  std::size_t B, T, C, NH, V;
  const char* name;
};
// Small: every size awkward (hs = 20, V = 97 prime). Large: the GPT-2-like case, V = 517.
inline const Shape kShapes[] = {{3, 17, 60, 3, 97, "B=3 T=17 C=60 NH=3 V=97"},
                         {2, 64, 128, 4, 517, "B=2 T=64 C=128 NH=4 V=517"}};
inline const int kThreadCounts[] = {1, 2};
// Attention also at a T spanning several of the CPU backend's 64-row causal blocks with a ragged
// last one (400 = 6 x 64 + 16), where its 2 MiB score groups hold 3 of the 4 heads (a ragged last
// group too).
inline const Shape kAttentionShapes[] = {kShapes[0], kShapes[1], {2, 400, 64, 2, 97, "B=2 T=400 C=64 NH=2 V=97"}};

// ------------------------------------------------------------------------------ helpers

inline bool report_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SHARDTRAIN_KERNEL_REPORT");
    return v && *v && std::string(v) != "0";
  }();
  return enabled;
}

// max|got - want| / max|want| (absolute when want is all zero); +inf if got has a NaN/inf.
inline double rel_error(const std::vector<float>& got, const Vec& want) {
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
inline std::string worst_element(const std::vector<float>& got, const Vec& want) {
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
inline std::vector<float> garbage(std::size_t n, int variant) {
  if (variant == 0) return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
  return random_floats(n, 0xBAD + unsigned(n), -1e4f, 1e4f);
}

// Tokens in [0, V) with many repeats: every 4th is token 7, every 4th (offset 1) is V-1, the
// rest uniform; token 0 appears at position 2.
inline std::vector<int32_t> tokens_with_repeats(std::size_t n, std::size_t V, unsigned seed) {
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
inline void check_op(const std::string& label, const RunFn& run, const std::vector<Expected>& expected) {
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

inline Vec add_vec(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

}  // namespace kernel_test
