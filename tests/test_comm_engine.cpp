// The comm engine over the in-process fake transport (fake_transport.hpp), no MPI: every collective
// at 1, 2, 3 and 4 ranks against a serial computation (the canonical all-reduce bitwise against the
// binary tree of communicator.hpp, computed here independently), split groups with their own names,
// sequence numbers and recorders, and phases on the records. Each case runs its ranks as threads and
// checks on the test's thread what they saw. (test_comm_engine_faults.cpp: timeouts, disagreements,
// skip-collective injection.)
#include <catch2/catch.hpp>

#include <barrier>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_transport.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/fault_injection.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/comm/transport.hpp"
#include "comm_engine_test_support.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using std::chrono::milliseconds;
using test::bitwise_equal;
using test::int_values;  // small integers: every sum below is exact in any order
using test::tree_sum;    // the canonical tree over the ranks' inputs, computed serially
using namespace comm_engine_test;

namespace {

// Rank r's input for the bitwise checks: values of varied magnitude, so the order of additions shows.
std::vector<float> tree_input(std::size_t n, int rank) {
  auto v = test::random_floats(n, 4242 + unsigned(rank), -1.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) v[i] *= std::ldexp(1.0f, int((i + std::size_t(rank)) % 9));
  return v;
}

bool power_of_two(int n) { return (n & (n - 1)) == 0; }

}  // namespace

TEST_CASE("comm engine: every collective matches a serial computation at 1, 2, 3 and 4 ranks", "[comm]") {
  for (const int W : {1, 2, 3, 4}) {
    INFO(W << " ranks");
    const std::size_t n = 37, block = 5;  // odd n: uneven halves in halving/doubling
    struct Seen {
      std::vector<float> auto_f, library_f, canonical, fast_tree;
      std::vector<double> auto_d;
      std::vector<std::int32_t> ints;
      std::vector<float> scattered;
      std::vector<std::uint64_t> gathered;
      std::vector<double> broadcast;
      std::string canonical_error, auto_algorithm, library_algorithm;
    };
    std::vector<Seen> seen(static_cast<std::size_t>(W));
    auto world = std::make_shared<test::FakeWorld>(W);
    test::run_ranks(W, [&](int r) {
      Seen& s = seen[std::size_t(r)];
      auto comm = make_communicator(world->transport(r), options("world"));
      auto library = make_communicator(world->transport(r), options("library", AllReduceAlgorithm::kLibrary));
      s.auto_algorithm = comm->stats().all_reduce_algorithm;
      s.library_algorithm = library->stats().all_reduce_algorithm;
      s.auto_f = int_values<float>(n, r, 1);
      comm->all_reduce(s.auto_f.data(), n);
      s.auto_d = int_values<double>(n, r, 2);
      comm->all_reduce_async(s.auto_d.data(), n).wait();
      s.ints = int_values<std::int32_t>(n, r, 3);
      comm->all_reduce(s.ints.data(), n);
      s.library_f = int_values<float>(n, r, 1);
      library->all_reduce(s.library_f.data(), n);
      s.canonical = tree_input(n, r);
      try {
        comm->all_reduce_canonical(s.canonical.data(), n);
      } catch (const UsageError& e) {
        s.canonical_error = e.what();
      }
      s.fast_tree = tree_input(n, r);
      comm->all_reduce(s.fast_tree.data(), n);
      const auto in = int_values<float>(block * std::size_t(W), r, 4);
      s.scattered.resize(block);
      comm->reduce_scatter(in.data(), s.scattered.data(), block);
      const std::uint64_t mine[2] = {0x9e3779b97f4a7c15ull * std::uint64_t(r + 1), std::uint64_t(r)};
      s.gathered.resize(2 * std::size_t(W));
      comm->all_gather(mine, s.gathered.data(), 2);
      s.broadcast = r == W - 1 ? int_values<double>(n, 42, 5) : std::vector<double>(n, 0.0);
      comm->broadcast(s.broadcast.data(), n, W - 1);
      comm->barrier();
    });

    std::vector<float> sum_f(n, 0.0f);
    std::vector<double> sum_d(n, 0.0);
    std::vector<std::int32_t> sum_i(n, 0);
    std::vector<std::vector<float>> tree_inputs;
    for (int q = 0; q < W; ++q) {
      const auto f = int_values<float>(n, q, 1);
      const auto d = int_values<double>(n, q, 2);
      const auto k = int_values<std::int32_t>(n, q, 3);
      for (std::size_t i = 0; i < n; ++i) sum_f[i] += f[i], sum_d[i] += d[i], sum_i[i] += k[i];
      tree_inputs.push_back(tree_input(n, q));
    }
    const auto tree = tree_sum(tree_inputs, 0, std::size_t(W));
    for (int r = 0; r < W; ++r) {
      INFO("rank " << r);
      const Seen& s = seen[std::size_t(r)];
      CHECK(s.auto_algorithm == (power_of_two(W) && W > 1 ? "halving" : "fake"));
      CHECK(s.library_algorithm == "fake");
      CHECK(s.auto_f == sum_f);
      CHECK(s.auto_d == sum_d);
      CHECK(s.ints == sum_i);
      CHECK(s.library_f == sum_f);
      if (power_of_two(W)) {
        CHECK(s.canonical_error.empty());
        CHECK(bitwise_equal(s.canonical, tree));
        CHECK(bitwise_equal(s.fast_tree, tree));  // the fast all-reduce is the same halving/doubling
      } else {
        CHECK_THAT(s.canonical_error, Catch::Contains("power-of-two") && Catch::Contains(std::to_string(W) + " ranks"));
      }
      std::vector<float> scattered(block, 0.0f);
      for (int q = 0; q < W; ++q) {
        const auto in = int_values<float>(block * std::size_t(W), q, 4);
        for (std::size_t i = 0; i < block; ++i) scattered[i] += in[std::size_t(r) * block + i];
      }
      CHECK(s.scattered == scattered);
      for (int q = 0; q < W; ++q) {
        CHECK(s.gathered[2 * std::size_t(q)] == 0x9e3779b97f4a7c15ull * std::uint64_t(q + 1));
        CHECK(s.gathered[2 * std::size_t(q) + 1] == std::uint64_t(q));
      }
      CHECK(s.broadcast == int_values<double>(n, 42, 5));
    }
    if (W == 4) {
      // The bitwise check can fail: adding the ranks left to right differs from the tree somewhere.
      std::vector<float> serial(n, 0.0f);
      for (const auto& x : tree_inputs)
        for (std::size_t i = 0; i < n; ++i) serial[i] += x[i];
      CHECK_FALSE(bitwise_equal(serial, tree));
    }
  }
}

TEST_CASE("comm engine: reduce-scatter sums in rank order and receives (W-1)/W of its input", "[comm]") {
  // Values whose float sum depends on the order (1e8 + 1 - 1e8 is 0 in float, 1e8 - 1e8 + 1 is 1):
  // the expected block is added left to right over ranks 0, 1, ..., whatever order the blocks
  // arrive in. Each rank receives exactly one block from every other rank (PeerStats), the bytes
  // of a bandwidth-optimal reduce-scatter, not the whole buffer.
  for (const int W : {2, 3, 4}) {
    INFO(W << " ranks");
    const std::size_t block = 6;
    const auto input = [&](int q) {
      std::vector<float> v(block * std::size_t(W));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = (q + int(i)) % 3 == 0 ? 1e8f : (q + int(i)) % 3 == 1 ? 1.0f : -1e8f;
      return v;
    };
    struct Seen {
      std::vector<float> out;
      std::vector<std::uint64_t> lanes;
      std::map<int, PeerStats> peers;
    };
    std::vector<Seen> seen(static_cast<std::size_t>(W));
    auto world = std::make_shared<test::FakeWorld>(W);
    test::run_ranks(W, [&](int r) {
      Seen& s = seen[std::size_t(r)];
      auto comm = make_communicator(world->transport(r), options("rs"));
      const std::vector<float> in = input(r);
      s.out.resize(block);
      comm->reduce_scatter(in.data(), s.out.data(), block);
      // uint64 lanes wrap, as deterministic mode's exact sums need.
      const std::vector<std::uint64_t> lanes(block * std::size_t(W), ~std::uint64_t(0) - std::uint64_t(r));
      s.lanes.resize(block);
      comm->reduce_scatter(lanes.data(), s.lanes.data(), block);
      s.peers = comm->stats().peers;
    });
    for (int r = 0; r < W; ++r) {
      INFO("rank " << r);
      std::vector<float> expect(block);
      std::uint64_t lane = 0;
      for (int q = 0; q < W; ++q) {
        const std::vector<float> in = input(q);
        for (std::size_t i = 0; i < block; ++i) expect[i] = q == 0 ? in[std::size_t(r) * block + i] : expect[i] + in[std::size_t(r) * block + i];
        lane += ~std::uint64_t(0) - std::uint64_t(q);
      }
      CHECK(bitwise_equal(seen[std::size_t(r)].out, expect));
      CHECK(seen[std::size_t(r)].lanes == std::vector<std::uint64_t>(block, lane));
      const auto& peers = seen[std::size_t(r)].peers;
      CHECK(peers.size() == std::size_t(W - 1));
      for (const auto& [peer, p] : peers) {
        CHECK(peer != r);
        CHECK(p.bytes == block * sizeof(float) + block * sizeof(std::uint64_t));  // one block of each call
      }
    }
  }
}

TEST_CASE("comm engine: bad requests are refused with one clear line", "[comm]") {
  auto world = std::make_shared<test::FakeWorld>(1, 100);  // a transport count limit of 100 elements
  auto comm = make_communicator(world->transport(0), options("g"));
  std::vector<float> x(200, 1.0f);
  CHECK_THROWS_WITH(comm->all_reduce(x.data(), 200),
                    "AllReduce on group g: 200 elements exceed the fake transport's count limit (100); split the buffer");
  CHECK_THROWS_WITH(comm->broadcast(x.data(), 4, 1), Catch::Contains("root 1 is not a rank of a 1-rank group"));
  CHECK_THROWS_WITH(comm->reduce_scatter(x.data(), x.data() + 1, 4), Catch::Contains("input and output overlap"));
  CHECK_THROWS_WITH(comm->all_reduce(static_cast<float*>(nullptr), 3), Catch::Contains("null buffer"));
  comm->all_reduce(x.data(), 100);  // at the limit: fine, and a sum over one rank changes nothing
  CHECK(x[99] == 1.0f);
  CHECK_THROWS_AS(make_communicator(world->transport(0), [] {
                    auto o = options("t");
                    o.timeout = milliseconds(0);
                    return o;
                  }()),
                  UsageError);
}

TEST_CASE("comm engine: split groups have their own names and sequence numbers", "[comm]") {
  const int W = 4;
  struct Seen {
    std::uint64_t parent_seq_after_split = 0, child_seq_after_split = 0, child_seq_after_op = 0,
                  parent_seq_end = 0;
    std::string child_name, again_name, three_name, halving_three_error;
    int child_size = 0, child_rank = -1;
    double child_sum = 0;
    bool three_is_null = false;
    float three_sum = 0;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    auto comm = make_communicator(world->transport(r), options("dp"));
    float x = 1.0f;
    comm->all_reduce(&x, 1);
    comm->barrier();
    // Even and odd world ranks, ordered by descending key: group rank = reverse order.
    auto half = comm->split(r % 2, -r, "half");
    s.parent_seq_after_split = comm->next_seq();
    s.child_seq_after_split = half->next_seq();
    s.child_name = half->name();
    s.child_size = half->size();
    s.child_rank = half->rank();
    double y = double(r);
    half->all_reduce(&y, 1);
    s.child_sum = y;
    s.child_seq_after_op = half->next_seq();
    auto again = comm->split(0, r, "half");  // the same name while "half" lives
    s.again_name = again->name();
    auto three = comm->split(r < 3 ? 0 : -1, r, "three");
    s.three_is_null = three == nullptr;
    if (three) {
      s.three_name = three->name();
      float z = 1.0f;
      three->all_reduce(&z, 1);  // auto on 3 ranks: the library's
      s.three_sum = z;
    }
    auto halving = make_communicator(world->transport(r), options("h", AllReduceAlgorithm::kHalvingDoubling));
    try {
      halving->split(r < 3 ? 0 : 1, r, "h3");
    } catch (const UsageError& e) {
      s.halving_three_error = e.what();
    }
    s.parent_seq_end = comm->next_seq();
  });
  for (int r = 0; r < W; ++r) {
    INFO("rank " << r);
    const Seen& s = seen[std::size_t(r)];
    CHECK(s.parent_seq_after_split == 4);  // all_reduce 1, barrier 2, split 3
    CHECK(s.child_seq_after_split == 1);   // a child counts from 1
    CHECK(s.child_name == "half");
    CHECK(s.child_size == 2);
    CHECK(s.child_rank == (r < 2 ? 1 : 0));  // keys -r: the higher world rank comes first
    CHECK(s.child_sum == (r % 2 ? 1.0 + 3.0 : 0.0 + 2.0));
    CHECK(s.child_seq_after_op == 2);
    CHECK(s.again_name == "half#2");
    CHECK(s.three_is_null == (r == 3));
    if (r < 3) {
      CHECK(s.three_name == "three");
      CHECK(s.three_sum == 3.0f);
      CHECK_THAT(s.halving_three_error, Catch::Contains("--allreduce halving needs a power-of-two number of ranks in group 'h3' (it has 3)"));
    } else {
      CHECK(s.halving_three_error.empty());  // a group of 1 is a power of two
    }
    CHECK(s.parent_seq_end == 6);  // the child's traffic does not advance the parent; two more splits do
  }
}

TEST_CASE("comm engine: each group records its own operations with the phase at submission", "[comm]") {
  const int W = 2;
  struct Seen {
    std::vector<FlightEntry> dp, ckpt, sub;
    bool separate = false;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  PhaseScope phase(Phase::kForward);  // process-wide: the same for every rank thread
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    auto dp = make_communicator(world->transport(r), options("dp"));
    dp->set_step(4);
    auto ckpt = dp->split(0, r, "ckpt", Phase::kCheckpoint);  // a fixed phase
    auto sub = ckpt->split(0, r, "sub");                      // inherits it
    float x = 1.0f;
    dp->all_reduce(&x, 1);
    ckpt->barrier();
    sub->barrier();
    s.separate = dp->recorder() != ckpt->recorder() && ckpt->recorder() != sub->recorder();
    s.dp = dp->recorder()->snapshot();
    s.ckpt = ckpt->recorder()->snapshot();
    s.sub = sub->recorder()->snapshot();
  });
  for (const Seen& s : seen) {
    CHECK(s.separate);
    REQUIRE(s.dp.size() == 2);  // Split, AllReduce
    CHECK(s.dp[0].op == CollectiveOp::kSplit);
    CHECK(s.dp[1].op == CollectiveOp::kAllReduce);
    CHECK(s.dp[1].seq == 2);
    CHECK(s.dp[1].phase == Phase::kForward);
    CHECK(s.dp[1].step == 4);
    CHECK(s.dp[1].group == "dp");
    REQUIRE(s.ckpt.size() == 2);  // Split, Barrier
    CHECK(s.ckpt[0].seq == 1);
    CHECK(s.ckpt[1].seq == 2);
    CHECK(s.ckpt[1].group == "ckpt");
    CHECK(s.ckpt[1].phase == Phase::kCheckpoint);
    REQUIRE(s.sub.size() == 1);
    CHECK(s.sub[0].phase == Phase::kCheckpoint);
    CHECK(s.sub[0].state == FlightState::kCompleted);
    // Ids order the entries of all of a rank's groups by submission.
    CHECK(s.dp[0].id < s.ckpt[0].id);
    CHECK(s.ckpt[1].id < s.sub[0].id);
  }
}

TEST_CASE("comm engine: phase names round-trip and bad names are refused naming the choices", "[comm]") {
  const Phase all[] = {Phase::kSetup,      Phase::kResume,     Phase::kData,
                       Phase::kForward,    Phase::kBackward,   Phase::kOptimizer,
                       Phase::kStepEnd,    Phase::kCheckpoint, Phase::kEvaluation, Phase::kFinish};
  const char* names[] = {"setup",     "resume",   "data", "forward", "backward",
                         "optimizer", "step-end", "ckpt", "eval",    "finish"};
  for (int i = 0; i < kNumPhases; ++i) {
    CHECK(std::string(phase_name(all[i])) == names[i]);
    CHECK(parse_phase(names[i]) == all[i]);
  }
  CHECK_THROWS_AS(parse_phase("lunch"), UsageError);
  CHECK_THROWS_WITH(parse_phase("lunch"),
                    "phase 'lunch' is not one of setup, resume, data, forward, backward, optimizer, step-end, ckpt, eval, finish");
  CHECK_THROWS_AS(parse_phase(""), UsageError);
  CHECK_THROWS_AS(parse_phase("Forward"), UsageError);  // names are exact
}

TEST_CASE("comm engine: PhaseScope sets the process-wide phase and restores the one before", "[comm]") {
  set_phase(Phase::kData);
  {
    PhaseScope outer(Phase::kForward);
    CHECK(current_phase() == Phase::kForward);
    {
      PhaseScope inner(Phase::kCheckpoint);
      CHECK(current_phase() == Phase::kCheckpoint);
    }
    CHECK(current_phase() == Phase::kForward);
  }
  CHECK(current_phase() == Phase::kData);
  set_phase(Phase::kSetup);
}
