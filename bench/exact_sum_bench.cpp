// Benchmark (not a timed test): deterministic mode's gradient sum (exact_sum.hpp) at GPT-2 small's
// gradient size, one rank, beside the fp32 accumulation fast mode does in place: seconds per
// micro-batch's add() (a step's first, then a later one), per step's agree() and decode(), and the
// fp32 `sum += grad` pass, so the sum's passes over memory at 124M elements are known apart from
// a training step's. Run (3 GB at the default size):
//   SHARDTRAIN_EXACT_SUM_BENCH=1 [SHARDTRAIN_EXACT_SUM_ELEMENTS=N] build/bench/shardtrain_bench "[exact-sum-bench]"
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/parallel/exact_sum.hpp"
#include "per_call_timing.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

// Median over 5 rounds of the seconds `body()` takes (one call a round: each is a pass over 0.5 GB).
template <typename F>
double median_s(F body) {
  return bench::median_ns_per_call(1, [&](int) { body(); }, 5) * 1e-9;
}

}  // namespace

TEST_CASE("exact sum: add, agree and decode at GPT-2 small's gradient size", "[.bench][exact-sum-bench]") {
  if (!std::getenv("SHARDTRAIN_EXACT_SUM_BENCH")) {
    WARN("skipped: set SHARDTRAIN_EXACT_SUM_BENCH=1");
    return;
  }
  const char* size = std::getenv("SHARDTRAIN_EXACT_SUM_ELEMENTS");
  const std::size_t n = size ? std::stoull(size) : std::size_t(124439808);  // GPT-2 small's parameters
  test::ensure_mpi();
  CommOptions o;
  o.name = "exact-bench";
  auto comm = make_mpi_communicator(MPI_COMM_SELF, o);
  // Gradient-like values: per 256-element chunk a scale, elements spread over 2^-20 of it.
  std::vector<float> grad(n), out(n, 0.0f);  // out: the fp32 sum first, then the decoded one
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> spread(-20, 0), scale(-30, -5);
  for (std::size_t c = 0; c < n; c += ExactSum::kChunk) {
    const int s = scale(rng);
    for (std::size_t i = c; i < std::min(n, c + ExactSum::kChunk); ++i) grad[i] = std::ldexp(mant(rng), s + spread(rng));
  }
  ExactSum exact({n});
  const double fp32_add = median_s([&] {
    for (std::size_t i = 0; i < n; ++i) out[i] += grad[i];
  });
  const double first_add = median_s([&] {  // a step's first micro-batch: digits stored, not added
    exact.clear();
    exact.add(grad.data());
  });
  const double add = median_s([&] { exact.add(grad.data()); });
  const double agree = median_s([&] { exact.agree(*comm, 8, "the bench gradient"); });
  const double decode = median_s([&] { exact.decode(exact.words(), 0, n, out.data()); });
  CHECK(std::isfinite(out[0]));
  std::printf("exact sum over %zu elements (1 rank; median of 5):\n", n);
  std::printf("  fp32 sum += grad      %8.1f ms  (%.2f ns/element)\n", 1e3 * fp32_add, 1e9 * fp32_add / double(n));
  std::printf("  add (first of a step) %8.1f ms  (%.2f ns/element)\n", 1e3 * first_add, 1e9 * first_add / double(n));
  std::printf("  add (later ones)      %8.1f ms  (%.2f ns/element)\n", 1e3 * add, 1e9 * add / double(n));
  std::printf("  agree (per step)      %8.1f ms  (%.2f ns/element)\n", 1e3 * agree, 1e9 * agree / double(n));
  std::printf("  decode (per step)     %8.1f ms  (%.2f ns/element)\n", 1e3 * decode, 1e9 * decode / double(n));
  std::printf("  lanes on the wire     %8.1f MB  (fp32: %.1f MB)\n", 1e-6 * double(n * ExactSum::kLanes * 8), 1e-6 * double(n * 4));
}
