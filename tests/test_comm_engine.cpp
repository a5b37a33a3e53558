// The comm engine over the in-process fake transport (fake_transport.hpp), no MPI: every collective
// at 1, 2, 3 and 4 ranks against a serial computation (the canonical all-reduce bitwise against the
// binary tree of communicator.hpp, computed here independently), split groups with their own names,
// sequence numbers and recorders, phases on the records, a collective timeout with the flight
// record it writes, and skip-collective injection with its phase= and group= selectors. Each case
// runs its ranks as threads and checks on the test's thread what they saw; timeouts are 200 ms, so
// every case takes well under a second.
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
#include "test_support.hpp"

using namespace shardtrain;
using std::chrono::milliseconds;
using test::bitwise_equal;
using test::int_values;  // small integers: every sum below is exact in any order
using test::tree_sum;    // the canonical tree over the ranks' inputs, computed serially

namespace {

CommOptions options(const std::string& name, AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kAuto) {
  CommOptions o;
  o.name = name;
  o.timeout = milliseconds(20000);  // generous: a hang fails the case rather than passing it
  o.all_reduce = all_reduce;
  return o;
}

// Rank r's input for the bitwise checks: values of varied magnitude, so the order of additions shows.
std::vector<float> tree_input(std::size_t n, int rank) {
  auto v = test::random_floats(n, 4242 + unsigned(rank), -1.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) v[i] *= std::ldexp(1.0f, int((i + std::size_t(rank)) % 9));
  return v;
}

bool power_of_two(int n) { return (n & (n - 1)) == 0; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": missing");
  return nlohmann::json::parse(in);
}

// The group named `name` in a flight record (null when absent).
nlohmann::json group_of(const nlohmann::json& record, const std::string& name) {
  for (const auto& g : record["groups"])
    if (g["name"] == name) return g;
  return nullptr;
}

std::vector<std::string> group_names(const nlohmann::json& record) {
  std::vector<std::string> names;
  for (const auto& g : record["groups"]) names.push_back(g["name"]);
  return names;
}

// Short timeouts for the failure cases: 200 ms, and little grace before wait() throws.
CommOptions failing_options(const std::string& name, const std::string& run_dir) {
  CommOptions o = options(name);
  o.timeout = milliseconds(200);
  o.teardown_grace = milliseconds(20);
  o.run_dir = run_dir;
  return o;
}

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

TEST_CASE("comm engine: a timeout names the operation and dumps every group of the rank", "[comm]") {
  const int W = 2;
  const std::string dir = test::temp_dir("engine-timeout");
  struct Seen {
    std::string error, later_error;
    int code = 0;
    bool dp_failed = false, ckpt_failed = true;
    double waited_s = 0;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  std::barrier sync(W);
  PhaseScope phase(Phase::kBackward);
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    auto ckpt = dp->split(0, r, "ckpt", Phase::kCheckpoint);  // dp seq 1
    ckpt->barrier();
    dp->set_step(1);
    std::vector<float> grads(64, 1.0f);
    dp->all_reduce(grads.data(), grads.size());  // seq 2: completes
    sync.arrive_and_wait();
    if (r == 0) world->withhold(1);  // from now on rank 1's messages are lost
    sync.arrive_and_wait();
    dp->set_step(2);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      dp->all_reduce(grads.data(), grads.size());  // seq 3: never completes
    } catch (const CommunicationError& e) {
      s.error = e.what();
      s.code = int(e.code());
    }
    s.waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.dp_failed = dp->failed();
    s.ckpt_failed = ckpt->failed();
    try {
      dp->barrier();
    } catch (const CommunicationError& e) {
      s.later_error = e.what();
    }
  });
  for (int r = 0; r < W; ++r) {
    INFO("rank " << r);
    const Seen& s = seen[std::size_t(r)];
    CHECK_THAT(s.error, Catch::StartsWith("collective timeout: AllReduce(seq=3, group=dp, numel=64, bytes=256, "
                                          "timeout_ms=200) after 0.") &&
                            Catch::EndsWith("flight record: " + dir + "/flight.rank" + std::to_string(r) + ".json"));
    CHECK(s.code == int(ExitCode::kCommunication));
    CHECK(s.waited_s >= 0.19);
    CHECK(s.waited_s < 2.0);
    CHECK(s.dp_failed);
    CHECK_FALSE(s.ckpt_failed);   // another group of the rank is unaffected
    CHECK(s.later_error == s.error);  // a failed communicator stays failed, with the first message

    const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
    CHECK(j["format"] == "shardtrain-flight-record");
    CHECK(j["format_version"] == 3);
    CHECK(j["rank"] == r);
    REQUIRE(j["triggers"].size() == 1);  // this rank's only dump so far
    CHECK(j["triggers"][0]["reason"] == "timeout");
    CHECK(j["triggers"][0]["trigger"] == j["trigger"]);
    CHECK(j["now"]["phase"] == "backward");  // the process-wide phase the test set
    CHECK(j["phases"].back()["phase"] == "backward");
    CHECK(j["world_size"] == W);
    CHECK(j["reason"] == "timeout");
    CHECK(j["timed_out_group"] == "dp");
    CHECK(j["trigger"]["group"] == "dp");
    CHECK(j["trigger"]["seq"] == 3);
    CHECK(j["trigger"]["op"] == "AllReduce");
    CHECK(j["trigger"]["step"] == 2);
    CHECK(j["trigger"]["phase"] == "backward");
    CHECK(j["trigger"]["skipped_by_fault_injection"] == false);
    CHECK(group_names(j) == std::vector<std::string>{"dp", "ckpt"});
    const auto dp = group_of(j, "dp");
    CHECK(dp["phase"].is_null());
    CHECK(dp["last_enqueued_seq"] == 3);
    CHECK(dp["last_started_seq"] == 3);
    CHECK(dp["last_completed_seq"] == 2);
    const auto& last = dp["entries"].back();
    CHECK(last["seq"] == 3);
    CHECK(last["state"] == "timed_out");
    CHECK(last["phase"] == "backward");
    CHECK(last["step"] == 2);
    CHECK(last["numel"] == 64);
    const auto ckpt = group_of(j, "ckpt");
    CHECK(ckpt["phase"] == "ckpt");
    CHECK(ckpt["last_completed_seq"] == 1);
    CHECK(ckpt["entries"].back()["op"] == "Barrier");
    CHECK(ckpt["entries"].back()["phase"] == "ckpt");
    CHECK(ckpt["entries"].back()["state"] == "completed");
  }
}

TEST_CASE("comm engine: ranks that disagree on a broadcast's length fail together before any data moves", "[comm]") {
  // Two ranks, no majority: both fail the group with the same kind of message listing both headers,
  // and the receiving rank's buffer is untouched (the check runs before the data).
  const std::string dir = test::temp_dir("engine-transport-error");
  std::vector<std::string> errors(2);
  std::vector<char> failed(2, 0);  // not vector<bool>: its bits share a word, which two rank threads would race on
  std::vector<float> received;
  auto world = std::make_shared<test::FakeWorld>(2);
  test::run_ranks(2, [&](int r) {
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    dp->set_step(7);
    std::vector<float> data(r == 0 ? 8 : 4, r == 0 ? 1.0f : 5.0f);
    try {
      dp->broadcast(data.data(), data.size(), 0);
    } catch (const CommunicationError& e) {
      errors[std::size_t(r)] = e.what();
    }
    failed[std::size_t(r)] = dp->failed();
    if (r == 1) received = data;
  });
  CHECK_THAT(errors[1], Catch::StartsWith("collective failed: Broadcast(seq=1, group=dp, numel=4, ") &&
                            Catch::Contains("no header has a majority: world rank 0 Broadcast seq 1 of 8 float32 "
                                            "elements (root 0); world rank 1 Broadcast seq 1 of 4 float32") &&
                            Catch::EndsWith("flight record: " + dir + "/flight.rank1.json"));
  CHECK_THAT(errors[0], Catch::StartsWith("collective failed: Broadcast(seq=1, group=dp, numel=8, "));
  CHECK(failed[0]);
  CHECK(failed[1]);
  CHECK(received == std::vector<float>(4, 5.0f));
  const auto j = read_json(dir + "/flight.rank1.json");
  CHECK(j["reason"] == "error");
  CHECK(j["timed_out_group"] == "dp");
  CHECK(j["trigger"]["seq"] == 1);
  CHECK(j["trigger"]["step"] == 7);
  CHECK(j["trigger"]["detected_by"] == "agreement");
  CHECK(j["trigger"]["agreement"]["majority"] == false);
  CHECK(j["trigger"]["agreement"]["headers"][0]["numel"] == 8);
  CHECK(j["trigger"]["agreement"]["headers"][1]["numel"] == 4);
  CHECK(group_of(j, "dp")["entries"].back()["state"] == "aborted");
}

TEST_CASE("comm engine: a wrong count on one of three ranks fails every rank at once, the others call its input untrusted",
          "[comm]") {
  // Library collectives (the fake's reduce-scatter and all-reduce, as MPI's at W = 3) do not check
  // sizes themselves: the header exchange must. Rank 1 is one element short (the wrong-count fault).
  // Every rank fails well within the collective timeout (no one waits for it), with a record whose
  // trigger lists every header; ranks 0 and 2 name rank 1 as the source of untrusted input, rank 1
  // says its own header is the odd one, and no rank's output was written.
  for (const bool reduce_scatter : {true, false}) {
    DYNAMIC_SECTION((reduce_scatter ? "ReduceScatter" : "AllReduce")) {
      const int W = 3;
      forget_flight_triggers();  // earlier dumps of these ranks
      const std::string dir = test::temp_dir(std::string("engine-agreement-") + (reduce_scatter ? "rs" : "ar"));
      std::vector<std::string> errors(W);
      std::vector<double> took(W);
      std::vector<char> untouched(W, 0);  // one byte per rank thread (vector<bool> packs them into one word)
      auto world = std::make_shared<test::FakeWorld>(W);
      test::run_ranks(W, [&](int r) {
        CommOptions o = failing_options("dp", dir);
        o.timeout = milliseconds(20000);  // the failure must not come from a timeout
        auto dp = make_communicator(world->transport(r), o);
        FaultInjection f;
        f.add("wrong-count:rank=1,step=2");
        dp->set_fault_injection(f);
        dp->set_step(2);
        const std::size_t block = 6;
        std::vector<float> in(block * W, 1.0f), out(block, -1.0f);
        const auto t0 = std::chrono::steady_clock::now();
        try {
          if (reduce_scatter) dp->reduce_scatter(in.data(), out.data(), block);
          else dp->all_reduce(out.data(), out.size());
        } catch (const CommunicationError& e) {
          errors[std::size_t(r)] = e.what();
        }
        took[std::size_t(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        untouched[std::size_t(r)] = out == std::vector<float>(block, -1.0f);
      });
      const std::string op = reduce_scatter ? "ReduceScatter" : "AllReduce";
      for (int r : {0, 2}) {
        CHECK_THAT(errors[std::size_t(r)], Catch::Contains("untrusted input from world rank(s) 1: world rank 1 has " + op +
                                                           " seq 1 of 5 float32 elements, this rank and the majority " +
                                                           op + " seq 1 of 6 float32 elements"));
        const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
        CHECK(j["trigger"]["agreement"]["untrusted_input_from"] == nlohmann::json::array({1}));
        CHECK(j["trigger"]["agreement"]["disagreeing_world_ranks"] == nlohmann::json::array({1}));
      }
      CHECK_THAT(errors[1], Catch::Contains("this rank's " + op + " seq 1 of 5 float32 elements disagrees with the "
                                            "majority's " + op + " seq 1 of 6 float32 elements"));
      const auto j1 = read_json(dir + "/flight.rank1.json");
      CHECK(j1["reason"] == "error");
      CHECK_FALSE(j1["trigger"]["agreement"].contains("untrusted_input_from"));
      for (int r = 0; r < W; ++r) {
        CHECK(took[std::size_t(r)] < 5.0);  // the teardown grace (20 ms) plus scheduling, not the 20 s timeout
        CHECK(untouched[std::size_t(r)]);
      }
      forget_flight_triggers();
    }
  }
}

TEST_CASE("comm engine: skip-collective with group= and phase= skips one collective of a split group", "[comm]") {
  const int W = 2;
  const std::string dir = test::temp_dir("engine-skip-group");
  struct Seen {
    std::string dp_error, ckpt_error;
    std::int64_t ckpt_step = 0;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  PhaseScope phase(Phase::kForward);
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    // Set on the parent before the split: the child inherits it (and the step).
    dp->set_fault_injection(FaultInjection::parse({"skip-collective:rank=1,step=3,phase=ckpt,group=ckpt"}));
    dp->set_step(3);
    auto ckpt = dp->split(0, r, "ckpt", Phase::kCheckpoint);  // dp seq 1, step 3, phase forward: not selected
    s.ckpt_step = ckpt->step();
    float x = 1.0f, y = 1.0f;
    try {
      dp->all_reduce(&x, 1);  // dp seq 2, step 3, phase forward: not selected
    } catch (const CommunicationError& e) {
      s.dp_error = e.what();
    }
    try {
      ckpt->all_reduce(&y, 1);  // ckpt seq 1, step 3, phase ckpt: rank 1 skips it
    } catch (const CommunicationError& e) {
      s.ckpt_error = e.what();
    }
  });
  for (int r = 0; r < W; ++r) {
    INFO("rank " << r);
    const Seen& s = seen[std::size_t(r)];
    CHECK(s.ckpt_step == 3);
    CHECK(s.dp_error.empty());
    CHECK_THAT(s.ckpt_error, Catch::StartsWith("collective timeout: AllReduce(seq=1, group=ckpt, numel=1, bytes=4, timeout_ms=200)"));
    CHECK((s.ckpt_error.find("(this rank skipped it: fault injection)") != std::string::npos) == (r == 1));
    const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
    CHECK(j["timed_out_group"] == "ckpt");
    CHECK(j["trigger"]["phase"] == "ckpt");
    CHECK(j["trigger"]["step"] == 3);
    CHECK(j["trigger"]["skipped_by_fault_injection"] == (r == 1));
    const auto dp = group_of(j, "dp");
    CHECK(dp["last_completed_seq"] == 2);
    CHECK(dp["entries"].back()["state"] == "completed");
    const auto ckpt = group_of(j, "ckpt");
    CHECK(ckpt["last_enqueued_seq"] == 1);
    CHECK(ckpt["last_started_seq"] == (r == 1 ? 0 : 1));  // the skipping rank is one behind
    CHECK(ckpt["entries"].back()["state"] == (r == 1 ? "skipped" : "timed_out"));
  }
}

TEST_CASE("comm engine: skip-collective with phase= waits for that process-wide phase, an unmatched selector skips nothing",
          "[comm]") {
  const int W = 2;
  const std::string dir = test::temp_dir("engine-skip-phase");
  struct Seen {
    std::string forward_error, backward_error, other_error;
  };
  std::vector<Seen> seen(W);
  auto world = std::make_shared<test::FakeWorld>(W);
  std::barrier sync(W);
  PhaseScope phase(Phase::kForward);
  test::run_ranks(W, [&](int r) {
    Seen& s = seen[std::size_t(r)];
    // A selector that matches no group: everything completes.
    auto other = make_communicator(world->transport(r), failing_options("other", dir));
    other->set_fault_injection(FaultInjection::parse({"skip-collective:rank=0,step=5,group=tp"}));
    other->set_step(5);
    float z = 1.0f;
    try {
      other->all_reduce(&z, 1);
      other->barrier();
    } catch (const CommunicationError& e) {
      s.other_error = e.what();
    }
    auto dp = make_communicator(world->transport(r), failing_options("dp", dir));
    dp->set_fault_injection(FaultInjection::parse({"skip-collective:rank=0,step=5,phase=backward"}));
    dp->set_step(5);
    float x = 1.0f;
    try {
      dp->all_reduce(&x, 1);  // forward: not selected
    } catch (const CommunicationError& e) {
      s.forward_error = e.what();
    }
    sync.arrive_and_wait();
    if (r == 0) set_phase(Phase::kBackward);  // the trainer's thread moving on, for every rank here
    sync.arrive_and_wait();
    try {
      dp->all_reduce(&x, 1);  // backward: rank 0 skips it
    } catch (const CommunicationError& e) {
      s.backward_error = e.what();
    }
  });
  for (int r = 0; r < W; ++r) {
    INFO("rank " << r);
    const Seen& s = seen[std::size_t(r)];
    CHECK(s.other_error.empty());
    CHECK(s.forward_error.empty());
    CHECK_THAT(s.backward_error, Catch::StartsWith("collective timeout: AllReduce(seq=2, group=dp,"));
    const auto j = read_json(dir + "/flight.rank" + std::to_string(r) + ".json");
    CHECK(j["timed_out_group"] == "dp");
    CHECK(j["trigger"]["phase"] == "backward");
    CHECK(j["trigger"]["skipped_by_fault_injection"] == (r == 0));
    CHECK(group_names(j) == std::vector<std::string>{"other", "dp"});
    const auto dp = group_of(j, "dp");
    CHECK(dp["entries"][0]["phase"] == "forward");
    CHECK(dp["entries"][0]["state"] == "completed");
    CHECK(dp["entries"][1]["phase"] == "backward");
    CHECK(dp["entries"][1]["state"] == (r == 0 ? "skipped" : "timed_out"));
    CHECK(group_of(j, "other")["last_completed_seq"] == 2);
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
