// Deterministic mode's reduction rule (exact_sum.hpp): the exact fixed-point sum of micro-batch
// gradients is bitwise the same for every split of the micro-batches over ranks and accumulation
// steps (groups of 1, 2, 3 and 4 ranks inside one job), equals an independent wide-integer
// evaluation of the rule's definition, is within fp32 rounding of the true sum, and refuses what
// it cannot hold the same way on every rank.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/parallel/exact_sum.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using test::bitwise_equal;

namespace {

std::unique_ptr<Communicator> exact_world(const std::string& name) {
  test::ensure_mpi();
  CommOptions o;
  o.name = name;
  o.timeout = std::chrono::milliseconds(60000);
  return make_mpi_communicator(MPI_COMM_WORLD, o);
}

// The chunks of the rule: [lo, hi) ranges of kChunk elements restarting at every segment.
std::vector<std::pair<std::size_t, std::size_t>> chunks_of(const std::vector<std::size_t>& segments) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t base = 0;
  for (std::size_t len : segments) {
    for (std::size_t lo = base; lo < base + len; lo += ExactSum::kChunk)
      out.emplace_back(lo, std::min(base + len, lo + ExactSum::kChunk));
    base += len;
  }
  return out;
}

// N micro-batch "gradients" over the segments with what makes exactness hard: per micro-batch scales
// 2^-10 .. 2^6 (so chunks of different micro-batches sit on different grids), elements spread over
// 2^-30 of their chunk's range, all-zero chunks in some micro-batches, subnormals, exact ties.
std::vector<std::vector<float>> hard_inputs(std::size_t N, const std::vector<std::size_t>& segments, unsigned seed) {
  std::size_t n = 0;
  for (std::size_t len : segments) n += len;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> spread(-30, 0), scale(-10, 6), pick(0, 9);
  std::vector<std::vector<float>> out(N, std::vector<float>(n));
  for (std::size_t m = 0; m < N; ++m) {
    const int s = scale(rng);
    for (std::size_t i = 0; i < n; ++i) out[m][i] = std::ldexp(mant(rng), s + spread(rng));
    for (const auto& [lo, hi] : chunks_of(segments)) {
      const int kind = pick(rng);
      // The chunk's first element sets its scale (so chunk maxima differ by at most 2^17 between
      // micro-batches, inside the bound for N = 12); the specials go last.
      out[m][lo] = std::ldexp(0.75f + 0.25f * mant(rng), s);
      if (kind == 0) std::fill(out[m].begin() + lo, out[m].begin() + hi, 0.0f);       // untouched rows
      if (kind == 1 && hi - lo > 1) out[m][hi - 1] = std::ldexp(1.0f, -140);            // a subnormal
      if (kind == 2 && hi - lo > 1) out[m][hi - 1] = std::ldexp(3.0f, s - 41);          // ties on a 2^(s-40) grid
    }
  }
  return out;
}

// The rule's definition evaluated independently, per element, with 128-bit integers (no wrapping,
// no shared words): each value rounded (nearest, ties even) to its chunk's grid in its own
// micro-batch, 2^(e+1-40) with 2^e <= chunk max < 2^(e+1); the integers moved to the finest grid G
// of the chunk and added; the sum converted to double, scaled by 2^G, rounded to fp32.
std::vector<float> reference_sum(const std::vector<std::vector<float>>& in, const std::vector<std::size_t>& segments) {
  std::vector<float> out(in[0].size());
  for (const auto& [lo, hi] : chunks_of(segments)) {
    std::vector<int> grid(in.size(), INT32_MAX);
    int G = INT32_MAX;
    for (std::size_t m = 0; m < in.size(); ++m) {
      float mx = 0;
      for (std::size_t i = lo; i < hi; ++i) mx = std::max(mx, std::fabs(in[m][i]));
      if (mx == 0) continue;
      int e;
      std::frexp(mx, &e);  // mx = f 2^e, f in [0.5, 1): 2^(e-1) <= mx < 2^e
      grid[m] = e - 40;
      G = std::min(G, grid[m]);
    }
    for (std::size_t i = lo; i < hi; ++i) {
      __int128 sum = 0;
      for (std::size_t m = 0; m < in.size(); ++m) {
        if (grid[m] == INT32_MAX) continue;
        const double v = std::nearbyint(std::ldexp(double(in[m][i]), -grid[m]));
        sum += __int128(std::int64_t(v)) << (grid[m] - G);
      }
      out[i] = G == INT32_MAX ? 0.0f : float(std::ldexp(double(sum), G));
    }
  }
  return out;
}

// The sum over group `g` (size W) of N micro-batches, rank r holding [r N/W, (r+1) N/W), local
// micro-batches added in `order`.
std::vector<float> group_sum(Communicator& g, const std::vector<std::vector<float>>& in,
                             const std::vector<std::size_t>& segments, bool reverse) {
  const std::size_t N = in.size(), A = N / std::size_t(g.size()), r = std::size_t(g.rank());
  ExactSum sum(segments);
  for (std::size_t j = 0; j < A; ++j) sum.add(in[r * A + (reverse ? A - 1 - j : j)].data());
  std::vector<float> out(sum.size());
  exact_all_reduce(g, sum, std::int64_t(N), "the test gradient", out.data());
  return out;
}

}  // namespace

TEST_CASE("exact sum: bitwise the same over 1, 2, 3 and 4 ranks and any accumulation order, equal to the definition",
          "[mpi][exact]") {
  auto world = exact_world("exact");
  const int W = world->size(), r = world->rank();
  const std::vector<std::size_t> segments = {1000, 256, 3, 2300};  // chunks restart per segment
  const std::size_t n = 1000 + 256 + 3 + 2300, N = 12;
  const auto in = hard_inputs(N, segments, 4242);
  const auto ref = reference_sum(in, segments);

  // Every group size that divides N and fits this job: each group computes the whole sum.
  for (int size : {1, 2, 3, 4}) {
    if (size > W) continue;
    auto g = world->split(r < size ? 0 : -1, r, "exact" + std::to_string(size));
    if (!g) continue;
    for (bool reverse : {false, true}) {
      const auto got = group_sum(*g, in, segments, reverse);
      INFO("group of " << size << " ranks, local order " << (reverse ? "reversed" : "forward"));
      CHECK(bitwise_equal(got, ref));
    }
  }
  // Accuracy against the exact sum (in double: 12 values of at most 2^-10 .. 2^6 with a spread of
  // 2^-30 fit its 53 bits except for the smallest ones, whose error is far below the bound): each
  // contribution moves by at most half its grid, 2^-40 of its chunk's maximum; the decode rounds
  // once to fp32 (2^-24 relative, or half the smallest subnormal).
  std::vector<std::pair<std::size_t, std::size_t>> chunk_of;  // element -> its chunk [lo, hi)
  for (const auto& chunk : chunks_of(segments))
    for (std::size_t i = chunk.first; i < chunk.second; ++i) chunk_of.push_back(chunk);
  double worst = 0;
  std::size_t differs_from_float_sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double exact = 0, grid_error = 0;
    float naive = 0;
    const auto [lo, hi] = chunk_of[i];
    for (std::size_t m = 0; m < N; ++m) {
      exact += double(in[m][i]);
      naive += in[m][i];
      double chunk_max = 0;
      for (std::size_t j = lo; j < hi; ++j) chunk_max = std::max(chunk_max, double(std::fabs(in[m][j])));
      grid_error += std::ldexp(chunk_max, -40);
    }
    const double bound = 1.01 * (std::ldexp(std::fabs(exact) + grid_error, -24) + grid_error) + std::ldexp(1.0, -150);
    worst = std::max(worst, std::fabs(double(ref[i]) - exact) / bound);
    if (std::memcmp(&naive, &ref[i], sizeof naive) != 0) ++differs_from_float_sum;
  }
  CHECK(worst <= 1.0);
  // The check is sensitive: a left-to-right fp32 sum differs from the rule in some elements.
  CHECK(differs_from_float_sum > 0);
}

TEST_CASE("exact sum: a spread beyond the 64-bit bound is refused on every rank, Inf and NaN decode to NaN",
          "[mpi][exact]") {
  auto world = exact_world("exact-bound");
  const int W = world->size();
  const std::vector<std::size_t> segments = {300};
  // Micro-batch 0's chunk 0 is 2^30 larger than the others': beyond 62 - 40 - ceil(log2 N).
  std::vector<std::vector<float>> in(std::size_t(W) * 2, std::vector<float>(300, 1.0f));
  for (float& x : in[0]) x = std::ldexp(1.0f, 30);
  CHECK_THROWS_WITH(group_sum(*world, in, segments, false),
                    Catch::Contains("elements [0, 256) of the test gradient") && Catch::Contains("2^30"));
  // Within the bound (2^16 at N = 2W <= 8): fine, and bitwise the definition.
  for (float& x : in[0]) x = std::ldexp(1.0f, 16);
  CHECK(bitwise_equal(group_sum(*world, in, segments, false), reference_sum(in, segments)));
  // A non-finite value in one micro-batch poisons its chunk only.
  in[std::size_t(W) * 2 - 1][260] = INFINITY;
  in[0][3] = NAN;
  const auto got = group_sum(*world, in, segments, false);
  CHECK(std::isnan(got[0]));
  CHECK(std::isnan(got[255]));
  CHECK(std::isnan(got[256]));
  CHECK(std::isnan(got[299]));
  in[0][3] = 1.0f;
  in[std::size_t(W) * 2 - 1][260] = 1.0f;
  CHECK(std::isfinite(group_sum(*world, in, segments, false)[0]));
}

TEST_CASE("exact sum: loss sums add in global micro-batch order, the same for every split", "[mpi][exact]") {
  auto world = exact_world("exact-loss");
  const int W = world->size(), r = world->rank();
  const std::size_t N = 12;
  std::vector<double> all(N);
  for (std::size_t m = 0; m < N; ++m) all[m] = std::ldexp(1.0 + 0.1 * double(m), int(m % 5) * 20 - 40);
  double serial = 0;
  for (double x : all) serial += x;
  for (int size : {1, 2, 3, 4}) {
    if (size > W) continue;
    auto g = world->split(r < size ? 0 : -1, r, "loss" + std::to_string(size));
    if (!g) continue;
    const std::size_t A = N / std::size_t(size);
    const std::vector<double> mine(all.begin() + std::ptrdiff_t(std::size_t(g->rank()) * A),
                                   all.begin() + std::ptrdiff_t(std::size_t(g->rank() + 1) * A));
    const double got = reduce_loss_sums(*g, true, mine);
    CHECK(std::memcmp(&got, &serial, sizeof got) == 0);
  }
}
