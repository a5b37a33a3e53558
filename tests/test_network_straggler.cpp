// Network stragglers (telemetry/network_straggler.hpp) from synthetic per-peer figures, and the
// step log's "peers" (telemetry/step_log.hpp) written and read back.
#include <catch2/catch.hpp>

#include <fstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/telemetry/network_straggler.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

constexpr double kMB = 1e6;

// One step of a halving/doubling-like exchange pattern: every pair of ranks on different hosts
// exchanges `bytes` each way at `fast` bytes/s, or `slow` when either rank is on `slow_host`. The
// end named in `late_waits` (pairs {waiter, peer}) also waited `wait_s` for its peer first: its
// seconds hold that wait, the peer's do not.
std::vector<RankLinkStep> step_of(std::int64_t step, const std::vector<std::string>& hosts, const std::string& slow_host,
                                  double fast, double slow, std::uint64_t bytes,
                                  const std::vector<std::pair<int, int>>& late_waits = {}, double wait_s = 0) {
  std::vector<RankLinkStep> out;
  for (int a = 0; a < int(hosts.size()); ++a) {
    RankLinkStep s{a, hosts[std::size_t(a)], step, {}};
    for (int b = 0; b < int(hosts.size()); ++b) {
      if (b == a) continue;
      const bool slowed = hosts[std::size_t(a)] == slow_host || hosts[std::size_t(b)] == slow_host;
      double seconds = double(bytes) / (slowed ? slow : fast);
      for (const auto& [waiter, peer] : late_waits)
        if (waiter == a && peer == b) seconds += wait_s;
      s.peers[b] = PeerTransfer{bytes, seconds};
    }
    out.push_back(s);
  }
  return out;
}

std::vector<RankLinkStep> steps_of(std::int64_t first, int n, const std::vector<std::string>& hosts,
                                   const std::string& slow_host, double fast, double slow, std::uint64_t bytes = 1 << 20,
                                   const std::vector<std::pair<int, int>>& late_waits = {}, double wait_s = 0) {
  std::vector<RankLinkStep> all;
  for (int i = 0; i < n; ++i) {
    auto s = step_of(first + i, hosts, slow_host, fast, slow, bytes, late_waits, wait_s);
    all.insert(all.end(), s.begin(), s.end());
  }
  return all;
}

}  // namespace

TEST_CASE("network stragglers: a host whose every link runs at a tenth is named with its rate", "[telemetry]") {
  const std::vector<std::string> hosts = {"node1", "node2", "node3", "node4"};
  // The healthy ranks 0 and 1 waited for the slow host's late partners (a wait as long as the slow
  // transfer): their own figures look slow; the lower end's figures must win.
  auto steps = steps_of(0, 5, hosts, "", 100 * kMB, 100 * kMB);
  const auto slow = steps_of(5, 4, hosts, "node4", 100 * kMB, 10 * kMB, 1 << 20, {{0, 2}, {1, 2}, {0, 1}}, 0.1);
  steps.insert(steps.end(), slow.begin(), slow.end());
  const NetworkStragglerReport r = detect_network_stragglers(steps);
  CHECK(r.steps_judged == 9);
  REQUIRE(r.stragglers.size() == 1);
  const NetworkStraggler& s = r.stragglers[0];
  CHECK(s.host == "node4");
  CHECK(s.ranks == std::vector<int>{3});
  CHECK(s.rate_Bps == Approx(10 * kMB));
  CHECK(s.others_rate_Bps == Approx(100 * kMB));
  CHECK(s.first_step == 5);
  CHECK(s.slow_steps == 4);
  CHECK(format_network_stragglers(r) == "network stragglers: host node4 (ranks 3) 10 MB/s against 100 MB/s, 4 steps from step 5");
  REQUIRE(r.hosts.size() == 4);
  CHECK(r.hosts[0].host == "node1");
}

TEST_CASE("network stragglers: fewer slow steps in a row than asked, uniform links, or two hosts name nobody",
          "[telemetry]") {
  const std::vector<std::string> hosts = {"a", "b", "c"};
  SECTION("two slow steps, then fast again: below consecutive = 3") {
    auto steps = steps_of(0, 2, hosts, "c", 100 * kMB, 10 * kMB);
    const auto fast = steps_of(2, 5, hosts, "", 100 * kMB, 100 * kMB);
    steps.insert(steps.end(), fast.begin(), fast.end());
    const auto r = detect_network_stragglers(steps);
    CHECK(r.stragglers.empty());
    CHECK(format_network_stragglers(r).empty());
    NetworkStragglerOptions two;
    two.consecutive = 2;
    CHECK(detect_network_stragglers(steps, two).stragglers.size() == 1);
  }
  SECTION("uniform links, a healthy peer waited for now and then") {
    const auto r = detect_network_stragglers(steps_of(0, 20, hosts, "", 100 * kMB, 100 * kMB, 1 << 20, {{0, 1}}, 0.5));
    CHECK(r.steps_judged == 20);
    CHECK(r.stragglers.empty());
  }
  SECTION("two hosts: which end of the one link is slow cannot be told") {
    const auto r = detect_network_stragglers(steps_of(0, 10, {"a", "b"}, "b", 100 * kMB, 1 * kMB));
    CHECK(r.steps_judged == 0);
    CHECK(r.stragglers.empty());
  }
  SECTION("steps that move a few bytes are not judged") {
    const auto r = detect_network_stragglers(steps_of(0, 10, hosts, "c", 100 * kMB, 1 * kMB, 100));
    CHECK(r.steps_judged == 0);
    CHECK(r.stragglers.empty());
  }
}

TEST_CASE("network stragglers: pairs on one host are not network links", "[telemetry]") {
  // Two ranks per host; node3's links to the others are slow, its two ranks' exchange is fast.
  const std::vector<std::string> hosts = {"node1", "node1", "node2", "node2", "node3", "node3"};
  auto steps = steps_of(0, 4, hosts, "node3", 100 * kMB, 5 * kMB);
  for (auto& s : steps)
    if (s.rank == 4) s.peers[5].seconds = double(s.peers[5].bytes) / (1000 * kMB);
    else if (s.rank == 5) s.peers[4].seconds = double(s.peers[4].bytes) / (1000 * kMB);
  const auto r = detect_network_stragglers(steps);
  REQUIRE(r.stragglers.size() == 1);
  CHECK(r.stragglers[0].host == "node3");
  CHECK(r.stragglers[0].ranks == std::vector<int>{4, 5});
  CHECK(r.stragglers[0].rate_Bps == Approx(5 * kMB));
}

TEST_CASE("network stragglers: the report's JSON reads back, bad options are refused", "[telemetry]") {
  const auto r = detect_network_stragglers(steps_of(0, 4, {"a", "b", "c"}, "b", 80 * kMB, 4 * kMB));
  REQUIRE(r.stragglers.size() == 1);
  const auto back = json_fields::read<NetworkStragglerReport>(JsonFile::parse(json_fields::write(r).dump(), "summary.json", "a summary"), "");
  CHECK(back.stragglers[0].host == "b");
  CHECK(back.stragglers[0].rate_Bps == Approx(r.stragglers[0].rate_Bps));
  CHECK(json_fields::write(back) == json_fields::write(r));
  NetworkStragglerOptions bad;
  bad.ratio = 1.5;
  CHECK_THROWS_AS(detect_network_stragglers({}, bad), UsageError);
}

TEST_CASE("step log: per-peer figures are written when present and read back", "[telemetry]") {
  const std::string dir = test::temp_dir("peers");
  {
    StepLog log(dir + "/steps.rank0.jsonl", 0, RunIdentity{});
    StepRecord a;
    a.step = 0;
    a.peers[1] = PeerTransfer{4096, 0.25};
    a.peers[3] = PeerTransfer{2048, 0.5};
    log.append(a);
    StepRecord b;
    b.step = 1;
    log.append(b);
  }
  const StepLogContents c = read_step_log(dir + "/steps.rank0.jsonl");
  REQUIRE(c.steps.size() == 2);
  CHECK(c.steps[0].record.peers == std::map<int, PeerTransfer>{{1, {4096, 0.25}}, {3, {2048, 0.5}}});
  CHECK(c.steps[1].record.peers.empty());
  std::ofstream(dir + "/bad.jsonl") << R"({"step": 0, "peers": {"x": {"bytes": 1, "s": 1}}})" << "\n";
  CHECK_THROWS_WITH(read_step_log(dir + "/bad.jsonl"), Catch::Contains(":1: step record field /peers has key \"x\": not a rank"));
  std::ofstream(dir + "/bad.jsonl") << R"({"step": 0, "peers": {"1": {"bytes": 1}}})" << "\n";
  CHECK_THROWS_WITH(read_step_log(dir + "/bad.jsonl"), Catch::EndsWith(":1: step record has no field /peers/1/s"));
}
