// Deterministic mode's reduction rule (exact_sum.hpp): the sum of micro-batch gradients is bitwise
// the same for every split of the micro-batches over ranks and accumulation steps (groups of 1, 2, 3
// and 4 ranks inside one job, uneven splits, every order), equals the rule evaluated independently
// in exact rational arithmetic (testdata/generators/exact_sum_reference.py ->
// testdata/reference/exact_sum.txt) on adversarial inputs for ANY finite values, and refuses only a
// NaN or Inf, naming the element, the same way on every rank.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

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

// One case of testdata/reference/exact_sum.txt: N micro-batches over the segments, and the rule's
// fp32 result per element, from exact rational arithmetic.
struct ReferenceCase {
  std::string name;
  std::vector<std::size_t> segments;
  std::vector<std::vector<float>> in;  // [micro-batch][element]
  std::vector<float> sum;
};

std::vector<float> hex_floats(std::istringstream& line) {
  std::vector<float> out;
  std::string word;
  while (line >> word) {
    const std::uint32_t bits = std::uint32_t(std::stoul(word, nullptr, 16));
    float x;
    std::memcpy(&x, &bits, sizeof x);
    out.push_back(x);
  }
  return out;
}

std::vector<ReferenceCase> reference_cases() {
  const std::string path = test::testdata_path("reference/exact_sum.txt");
  std::ifstream f(path);
  REQUIRE(f.good());
  std::vector<ReferenceCase> cases;
  std::string text;
  while (std::getline(f, text)) {
    std::istringstream line(text);
    std::string kind;
    line >> kind;
    if (kind == "case") {
      ReferenceCase c;
      std::size_t N;
      std::string segments;
      line >> c.name >> N >> segments;
      std::istringstream seg(segments);
      for (std::string part; std::getline(seg, part, ',');) c.segments.push_back(std::stoul(part));
      cases.push_back(c);
    } else if (kind == "in") {
      cases.back().in.push_back(hex_floats(line));
    } else if (kind == "sum") {
      cases.back().sum = hex_floats(line);
    }
  }
  REQUIRE(cases.size() == 6);
  for (const auto& c : cases) {
    const std::size_t n = std::accumulate(c.segments.begin(), c.segments.end(), std::size_t(0));
    REQUIRE(c.sum.size() == n);
    for (const auto& mb : c.in) REQUIRE(mb.size() == n);
  }
  return cases;
}

// The sum over group `g` of the micro-batches in[order[k]], rank r adding those k with k % W == r
// (so W need not divide N: the sum itself does not care), in the order given.
std::vector<float> group_sum(Communicator& g, const std::vector<std::vector<float>>& in,
                             const std::vector<std::size_t>& segments, const std::vector<std::size_t>& order,
                             const std::string& what = "the test gradient", std::vector<std::string> names = {}) {
  ExactSum sum(segments, std::move(names));
  for (std::size_t k = 0; k < order.size(); ++k)
    if (k % std::size_t(g.size()) == std::size_t(g.rank())) sum.add(in[order[k]].data());
  std::vector<float> out(sum.size());
  exact_all_reduce(g, sum, std::int64_t(in.size()), what, out.data());
  return out;
}

std::vector<std::size_t> identity(std::size_t n) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  return order;
}

// Elements where two results differ, for the failure message.
std::string first_differences(const std::vector<float>& got, const std::vector<float>& want) {
  std::ostringstream o;
  int shown = 0;
  for (std::size_t i = 0; i < got.size() && shown < 5; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) o << " [" << i << "] " << got[i] << " != " << want[i], ++shown;
  return o.str();
}

}  // namespace

TEST_CASE("exact sum: every reference case bitwise over groups of 1, 2, 3 and 4 ranks, any order and split",
          "[mpi][exact]") {
  auto world = exact_world("exact");
  const int W = world->size(), r = world->rank();
  const auto cases = reference_cases();
  std::mt19937 rng(47);
  for (int size : {1, 2, 3, 4}) {
    if (size > W) continue;
    auto g = world->split(r < size ? 0 : -1, r, "exact" + std::to_string(size));
    for (const auto& c : cases) {
      // In order, reversed, and two shuffles (the same on every rank: one generator, same draws).
      std::vector<std::vector<std::size_t>> orders = {identity(c.in.size())};
      orders.push_back({orders[0].rbegin(), orders[0].rend()});
      for (int s = 0; s < 2; ++s) {
        orders.push_back(orders[0]);
        std::shuffle(orders.back().begin(), orders.back().end(), rng);
      }
      if (!g) continue;
      for (const auto& order : orders) {
        const auto got = group_sum(*g, c.in, c.segments, order);
        INFO("case " << c.name << ", group of " << size << " ranks, order starting " << order[0] << ","
                     << order[1] << ":" << first_differences(got, c.sum));
        CHECK(bitwise_equal(got, c.sum));
      }
    }
  }
}

TEST_CASE("exact sum: every order of a small set of mixed magnitudes gives the reference, bitwise", "[mpi][exact]") {
  auto world = exact_world("exact-perm");
  const auto cases = reference_cases();
  const auto& c = *std::find_if(cases.begin(), cases.end(), [](const ReferenceCase& k) { return k.name == "permutations"; });
  REQUIRE(c.in.size() == 5);
  // Each rank alone (a group of one), then the whole world splitting each order over its ranks.
  auto alone = world->split(world->rank(), 0, "exact-alone");
  auto order = identity(c.in.size());
  int orders = 0;
  do {
    const auto mine = group_sum(*alone, c.in, c.segments, order);
    const auto split = group_sum(*world, c.in, c.segments, order);
    INFO("order " << order[0] << order[1] << order[2] << order[3] << order[4]);
    CHECK(bitwise_equal(mine, c.sum));
    CHECK(bitwise_equal(split, c.sum));
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 120);
}

TEST_CASE("exact sum: a value range the old 64-bit sum refused is summed, NaN and Inf are refused naming the element",
          "[mpi][exact]") {
  auto world = exact_world("exact-refuse");
  const int W = world->size();
  const std::vector<std::size_t> segments = {300};
  const std::size_t N = std::size_t(W) * 2;
  // Micro-batch 0's chunk is 2^100 larger than the others' (the old sum refused 2^(22 - log2 N)):
  // the sum keeps 2^100 + the rest truncated to the window, on every layout the same.
  std::vector<std::vector<float>> in(N, std::vector<float>(300, 1.0f));
  for (std::size_t i = 0; i < ExactSum::kChunk; ++i) in[0][i] = std::ldexp(1.0f, 100);
  const auto spiked = group_sum(*world, in, segments, identity(N));
  CHECK(spiked[0] == std::ldexp(1.0f, 100));  // the ones are 100 bits below: dropped, as the rule says
  CHECK(spiked[299] == float(N));         // chunk [256, 300) has no spike: exact
  // A NaN in rank 0's first micro-batch and an Inf in the last rank's: refused on every rank alike,
  // naming the first chunk's element and how many chunks hold one.
  in[N - 1][260] = INFINITY;
  in[0][3] = NAN;
  CHECK_THROWS_WITH(group_sum(*world, in, segments, identity(N)),
                    Catch::Contains("non-finite gradient: element 3 of the test gradient is NaN") &&
                        Catch::Contains("2 chunks of 256 elements"));
  in[0][3] = 1.0f;
  // With segment names: the element is named within its unit.
  CHECK_THROWS_WITH(group_sum(*world, in, segments, identity(N), "the gradient", {"unit h.1"}),
                    Catch::Contains("element 260 of unit h.1 (the gradient) is Inf") && Catch::Contains("(1 chunk "));
  in[N - 1][260] = 1.0f;
  CHECK(std::isfinite(group_sum(*world, in, segments, identity(N))[260]));
  // A global batch beyond what the lanes add exactly is a configuration error, refused at once.
  ExactSum sum(segments);
  CHECK_THROWS_WITH(sum.agree(*world, ExactSum::kMaxMicroBatches + 1, "the test gradient"),
                    Catch::Contains("micro-batches per step"));
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
