// The resilient launcher's decisions (launch/restart_policy.hpp), the child command it rewrites
// (launch/child_command.hpp), its verdicts from a command's output (launch/attempt_verdict.hpp)
// and its restart log (launch/restart_log.hpp): pure functions, driven by made-up attempts.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shardtrain/base/error.hpp"
#include "shardtrain/launch/attempt_verdict.hpp"
#include "shardtrain/launch/attempt_watch.hpp"
#include "shardtrain/launch/child_command.hpp"
#include "shardtrain/launch/host_probe.hpp"
#include "shardtrain/launch/restart_log.hpp"
#include "shardtrain/launch/restart_policy.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::launch;

namespace {

AttemptOutcome failed(int status, std::optional<int> culprit = std::nullopt, std::string host = "",
                      bool committed = false) {
  AttemptOutcome o;
  o.exit_status = status;
  o.culprit_rank = culprit;
  o.culprit_host = std::move(host);
  o.committed_checkpoint = committed;
  return o;
}

// Runs the policy over a sequence of outcomes as the launcher does (attempt numbers advancing),
// returning every decision.
std::vector<NextAction> run(const RestartPolicy& p, PolicyState& s, const std::vector<AttemptOutcome>& outcomes) {
  std::vector<NextAction> out;
  for (const auto& o : outcomes) {
    out.push_back(decide_after_attempt(p, s, o));
    if (out.back().action != Action::kRestart) break;
    ++s.attempt;
  }
  return out;
}

RestartPolicy elastic(int world, int micro_batches, int min_ranks) {
  RestartPolicy p;
  p.min_ranks = min_ranks;
  p.launch_world = world;
  p.micro_batches = micro_batches;
  p.max_restarts = 10;
  return p;
}

}  // namespace

TEST_CASE("launch policy: a successful attempt finishes with 0", "[launch]") {
  PolicyState s;
  const NextAction a = decide_after_attempt(RestartPolicy{}, s, failed(0));
  CHECK(a.action == Action::kFinish);
  CHECK(a.exit_status == 0);
}

TEST_CASE("launch policy: exit 2 (usage or input error) is never retried", "[launch]") {
  RestartPolicy p;
  p.max_restarts = 100;
  PolicyState s;
  const NextAction a = decide_after_attempt(p, s, failed(2, 1, "n1"));
  CHECK(a.action == Action::kFinish);
  CHECK(a.exit_status == 2);
  CHECK(s.same_culprit_runs == 0);  // an input error names nobody
}

TEST_CASE("launch policy: SIGUSR1 ends the job with the attempt's status, no restart", "[launch]") {
  AttemptOutcome o = failed(143);
  o.stop_requested = true;
  PolicyState s;
  const NextAction a = decide_after_attempt(RestartPolicy{}, s, o);
  CHECK(a.action == Action::kFinish);
  CHECK(a.exit_status == 143);
}

TEST_CASE("launch policy: the backoff doubles with each failure that made no progress, capped at 60 s", "[launch]") {
  RestartPolicy p;
  p.backoff_s = 5;
  p.max_restarts = 20;
  PolicyState s;
  std::vector<double> waits;
  for (const auto& a : run(p, s, std::vector<AttemptOutcome>(6, failed(1)))) waits.push_back(a.wait_s);
  CHECK(waits == std::vector<double>{5, 10, 20, 40, 60, 60});
}

TEST_CASE("launch policy: an attempt that committed a checkpoint resets the backoff", "[launch]") {
  RestartPolicy p;
  p.backoff_s = 1;
  p.max_restarts = 20;
  PolicyState s;
  const auto a = run(p, s, {failed(1), failed(1), failed(1, std::nullopt, "", /*committed=*/true), failed(1)});
  REQUIRE(a.size() == 4);
  CHECK(a[0].wait_s == 1);
  CHECK(a[1].wait_s == 2);
  CHECK(a[2].wait_s == 1);  // progress: not a crash loop
  CHECK(a[3].wait_s == 2);
}

TEST_CASE("launch policy: restarts used up stop the job with the last status, logged", "[launch]") {
  RestartPolicy p;
  p.max_restarts = 2;
  PolicyState s;
  const auto a = run(p, s, {failed(1), failed(137), failed(134)});
  REQUIRE(a.size() == 3);
  CHECK(a[0].action == Action::kRestart);
  CHECK(a[1].action == Action::kRestart);
  CHECK(a[2].action == Action::kStop);
  CHECK(a[2].exit_status == 134);
  CHECK(a[2].logged_stop);
  CHECK_THAT(a[2].message, Catch::Contains("no restarts left (--max-restarts 2)"));
}

TEST_CASE("launch policy: --max-restarts 0 runs once and stops", "[launch]") {
  RestartPolicy p;
  p.max_restarts = 0;
  PolicyState s;
  CHECK(decide_after_attempt(p, s, failed(1, 3)).action == Action::kStop);
}

TEST_CASE("launch policy: the same culprit K times in a row with a known host is excluded (75)", "[launch]") {
  RestartPolicy p;
  p.exclude_hosts = true;
  p.rank_failures = 2;
  p.max_restarts = 10;
  PolicyState s;
  const auto a = run(p, s, {failed(1, 3, "n2"), failed(1, 3, "n2")});
  REQUIRE(a.size() == 2);
  CHECK(a[0].action == Action::kRestart);
  CHECK(a[1].action == Action::kExclude);
  CHECK(a[1].exit_status == kExcludedExitStatus);
  CHECK(a[1].exclude_host == "n2");
  CHECK(a[1].exclude_rank == 3);
  CHECK_THAT(a[1].message, Catch::Contains("rank 3 named 2 times in a row"));
}

TEST_CASE("launch policy: a different culprit starts the count over", "[launch]") {
  RestartPolicy p;
  p.exclude_hosts = true;
  p.rank_failures = 2;
  p.max_restarts = 10;
  PolicyState s;
  const auto a = run(p, s, {failed(1, 3, "n2"), failed(1, 1, "n1"), failed(1, 3, "n2"), failed(1, 3, "n2")});
  REQUIRE(a.size() == 4);
  CHECK(a[2].action == Action::kRestart);
  CHECK(s.same_culprit_runs == 2);
  CHECK(a[3].action == Action::kExclude);
}

TEST_CASE("launch policy: no culprit (ambiguous, or the whole job's error) is never excluded", "[launch]") {
  RestartPolicy p;
  p.exclude_hosts = true;
  p.rank_failures = 1;
  p.max_restarts = 5;
  PolicyState s;
  const auto a = run(p, s, {failed(1), failed(1), failed(1)});
  for (const auto& x : a) CHECK(x.action == Action::kRestart);
  CHECK(s.same_culprit_runs == 0);
}

TEST_CASE("launch policy: a culprit whose host is unknown is not excluded, the job restarts", "[launch]") {
  RestartPolicy p;
  p.exclude_hosts = true;
  p.rank_failures = 1;
  p.max_restarts = 5;
  PolicyState s;
  const NextAction a = decide_after_attempt(p, s, failed(1, 2, ""));
  CHECK(a.action == Action::kRestart);
  CHECK_THAT(a.note, Catch::Contains("host is unknown: not excluded"));
}

TEST_CASE("launch policy: without --exclude-cmd a culprit reaching K only restarts", "[launch]") {
  RestartPolicy p;
  p.rank_failures = 1;
  p.max_restarts = 5;
  PolicyState s;
  CHECK(decide_after_attempt(p, s, failed(1, 2, "n1")).action == Action::kRestart);
}

TEST_CASE("launch policy: elastic world size follows the capacity and divides the micro-batches", "[launch]") {
  // 4 ranks, 8 micro-batches: capacity 3 -> 2 (3 does not divide 8); back to 4 -> 4.
  const RestartPolicy p = elastic(4, 8, 1);
  PolicyState s;
  s.world = 4;
  WorldChoice c = choose_world(p, s, 3);
  REQUIRE(c.world);
  CHECK(*c.world == 2);
  CHECK(c.reason == "capacity 3 ranks (--capacity-cmd)");
  c = choose_world(p, s, 4);
  REQUIRE(c.world);
  CHECK(*c.world == 4);
  CHECK(c.reason == "capacity back to 4 ranks");
}

TEST_CASE("launch policy: elastic capacity never exceeds the first launch, nor the unchanged world", "[launch]") {
  const RestartPolicy p = elastic(4, 8, 1);
  PolicyState s;
  s.world = 4;
  const WorldChoice c = choose_world(p, s, 16);
  REQUIRE(c.world);
  CHECK(*c.world == 4);
  CHECK(c.reason.empty());
  const WorldChoice none = choose_world(p, s, std::nullopt);  // no capacity command: the launch's
  CHECK(*none.world == 4);
}

TEST_CASE("launch policy: elastic: a rank failing K times in a row loses its slot, and the count restarts", "[launch]") {
  RestartPolicy p = elastic(3, 6, 1);
  p.rank_failures = 2;
  PolicyState s;
  s.world = 3;
  run(p, s, {failed(1, 2), failed(1, 2)});
  REQUIRE(s.same_culprit_runs == 2);
  const WorldChoice c = choose_world(p, s, std::nullopt);
  REQUIRE(c.world);
  CHECK(*c.world == 2);
  CHECK(c.reason == "rank 2 failed 2 times in a row");
  CHECK(s.same_culprit_runs == 0);
  CHECK_FALSE(s.last_culprit);
}

TEST_CASE("launch policy: elastic: no world size at least --min-ranks fits: stop", "[launch]") {
  const RestartPolicy p = elastic(4, 8, 3);  // capacity 3: 3 does not divide 8, and 2 < min 3
  PolicyState s;
  s.world = 4;
  const WorldChoice c = choose_world(p, s, 3);
  CHECK_FALSE(c.world);
  CHECK_THAT(c.reason, Catch::Contains("no world size between --min-ranks 3 and 3 divides"));
}

TEST_CASE("launch policy: bad option values are refused by name", "[launch]") {
  RestartPolicy p;
  p.rank_failures = 0;
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("--rank-failures"));
  p = RestartPolicy{};
  p.backoff_s = -1;
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("--backoff"));
  p = elastic(2, 8, 3);
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("--min-ranks 3 is above the command's 2 ranks"));
}

TEST_CASE("launch command: run folder, rank count and the restart's rewrite", "[launch]") {
  const ChildCommand c = ChildCommand::parse(
      {"mpirun", "-np", "4", "ddp-train", "--global-batch", "16", "--micro-batch=2", "--run-dir", "R"});
  CHECK(c.run_dir() == "R");
  CHECK(c.ckpt_dir() == "R/checkpoints");
  CHECK(c.rank_count() == 4);
  CHECK(c.global_batch() == 16);
  CHECK(c.micro_batch() == 2);
  CHECK(c.for_attempt(0, 4) == c.argv());
  const auto again = c.for_attempt(1, 2);
  CHECK(again == std::vector<std::string>{"mpirun", "-np", "2", "ddp-train", "--global-batch", "16", "--micro-batch=2",
                                          "--run-dir", "R", "--resume", "auto"});
  const ChildCommand s = ChildCommand::parse({"srun", "--ntasks=3", "ddp-train", "--run-dir=X", "--resume", "auto"});
  CHECK(s.rank_count() == 3);
  CHECK(s.for_attempt(2, 2) == std::vector<std::string>{"srun", "--ntasks=2", "ddp-train", "--run-dir=X", "--resume", "auto"});
  CHECK_THROWS_WITH(ChildCommand::parse({"mpirun", "ddp-train"}), Catch::Contains("--run-dir"));
}

TEST_CASE("launch verdict: from a command's output without flight records", "[launch]") {
  const AttemptVerdict ours = verdict_from_output("x\n[rank 2/4] error: step 3: non-finite loss\n");
  CHECK(ours.verdict_class == VerdictClass::kErrorExit);
  CHECK(ours.culprit_rank == 2);
  const AttemptVerdict died = verdict_from_output(
      "mpirun noticed that process rank 3 with PID 77 on node n2 exited on signal 9 (Killed).\n"
      "mpirun noticed that process rank 1 with PID 70 on node n1 exited on signal 9 (Killed).\n");
  CHECK(died.verdict_class == VerdictClass::kDeadRank);
  CHECK(died.culprit_rank == 1);
  CHECK(died.culprit_host == "n1");
  CHECK(verdict_from_output("nothing useful").verdict_class == VerdictClass::kAmbiguous);
}

TEST_CASE("launch restart log: written and read back unchanged", "[launch]") {
  RestartLog log;
  log.final_exit_status = 75;
  RestartRecord r;
  r.attempt = 1;
  r.previous_exit_status = 137;
  r.failed_rank = 1;
  AttemptVerdict v;
  v.verdict_class = VerdictClass::kDeadRank;
  v.culprit_rank = 1;
  v.culprit_host = "n1";
  v.group = "dp";
  v.seq = 20;
  v.step = 4;
  v.diagnosis_s = 2.5;
  r.verdict = v;
  r.resumed_from = "R/checkpoints/step_00000004";
  r.relaunch_time = 1000.5;
  r.first_resumed_step_time = 1003.25;
  r.world = WorldChange{2, 1, std::string("capacity 1 ranks (--capacity-cmd)")};
  log.restarts.push_back(r);
  log.final_verdict = v;
  log.stop_reason = "excluded host n1";
  const std::string dir = test::temp_dir("restart_log");
  const std::string path = dir + "/restarts.json";
  write_restart_log(path, log);
  CHECK(read_restart_log(path) == log);
  CHECK(read_restart_log(path).restarts[0].restart_s() == Approx(2.75));
  CHECK_THROWS_WITH(read_restart_log(dir + "/none.json"), Catch::Contains("none.json"));
}

TEST_CASE("launch policy: a lost node's host is excluded at once, without K verdicts", "[launch]") {
  RestartPolicy p;
  p.exclude_hosts = true;
  p.rank_failures = 3;
  p.max_restarts = 5;
  PolicyState s;
  AttemptOutcome o = failed(137, 4, "n2");
  o.lost_node_ranks = 2;
  const NextAction a = decide_after_attempt(p, s, o);
  CHECK(a.action == Action::kExclude);
  CHECK(a.exclude_host == "n2");
  CHECK_THAT(a.message, Catch::Contains("node lost: 2 ranks gone at once"));
}

TEST_CASE("launch policy: elastic: a lost node's slots stay lost, whatever the capacity command says", "[launch]") {
  const RestartPolicy p = elastic(6, 12, 1);  // 3 nodes x 2 ranks
  PolicyState s;
  s.world = 6;
  AttemptOutcome o = failed(137, 4, "n3");
  o.lost_node_ranks = 2;
  REQUIRE(decide_after_attempt(p, s, o).action == Action::kRestart);
  WorldChoice c = choose_world(p, s, 6);  // Slurm has not noticed yet
  REQUIRE(c.world);
  CHECK(*c.world == 4);
  CHECK(c.reason == "2 ranks' slots on lost nodes");
  ++s.attempt;
  REQUIRE(decide_after_attempt(p, s, failed(1)).action == Action::kRestart);  // a later, unrelated failure
  c = choose_world(p, s, std::nullopt);
  CHECK(*c.world == 4);  // still off the lost node
}

TEST_CASE("launch verdict: one host all of whose ranks left no record is a lost node", "[launch]") {
  RankHosts placement;
  placement.hosts = {"n1", "n1", "n2", "n2", "n3", "n3"};
  const std::map<int, std::string> recorded = {{0, "n1"}, {1, "n1"}, {4, "n3"}, {5, "n3"}};
  const auto lost = lost_node(placement, recorded);
  REQUIRE(lost);
  CHECK(lost->host == "n2");
  CHECK(lost->ranks == std::vector<int>{2, 3});
  CHECK_FALSE(lost_node(placement, {{0, "n1"}, {1, "n1"}, {2, "n2"}, {4, "n3"}, {5, "n3"}}));  // one rank dead: no node
  CHECK_FALSE(lost_node(placement, {{0, "n1"}, {1, "n1"}}));  // two hosts gone: no one node
  CHECK_FALSE(lost_node(placement, {}));                     // the whole job
  RankHosts one_node;
  one_node.hosts = {"vm", "vm"};
  CHECK_FALSE(lost_node(one_node, {{0, "vm"}}));  // a lost rank on a one-node job
}

TEST_CASE("launch command: after a node loss mpirun runs on the live hosts, srun excludes the lost one", "[launch]") {
  const std::map<std::string, int> live = {{"n1", 2}, {"n3", 2}};
  CHECK(ChildCommand::on_hosts({"mpirun", "-H", "n1,n2,n3", "-np", "4", "ddp-train"}, live, {"n2"}) ==
        std::vector<std::string>{"mpirun", "--mca", "orte_no_vm", "1", "-H", "n1:2,n3:2", "-np", "4", "ddp-train"});
  CHECK(ChildCommand::on_hosts({"/usr/bin/srun", "--ntasks", "4", "ddp-train"}, live, {"n2"}) ==
        std::vector<std::string>{"/usr/bin/srun", "--exclude=n2", "--ntasks", "4", "ddp-train"});
  CHECK(ChildCommand::on_hosts({"./job.sh", "x"}, live, {"n2"}) == std::vector<std::string>{"./job.sh", "x"});
  CHECK(ChildCommand::on_hosts({"mpirun", "-np", "4"}, live, {"n2"}, /*in_allocation=*/true) ==
        std::vector<std::string>{"mpirun", "--mca", "orte_no_vm", "1", "-H", "n1:2,n3:2", "--mca", "plm_slurm_args",
                                 "--overlap", "-np", "4"});
  CHECK(ChildCommand::on_hosts({"srun", "-n", "4"}, live, {"n2"}, true) ==
        std::vector<std::string>{"srun", "--overlap", "--exclude=n2", "-n", "4"});
  CHECK(ChildCommand::on_hosts({"mpirun", "-np", "2"}, {}, {}) == std::vector<std::string>{"mpirun", "-np", "2"});
}

TEST_CASE("launch verdict: a partition: the one host the probe cannot reach is named, not the rank that timed out", "[launch]") {
  RankHosts placement;
  placement.hosts = {"n1", "n1", "n2", "n2", "n3", "n3"};
  AttemptVerdict hang;  // every rank timed out in the same all-reduce: the records blame nobody
  hang.verdict_class = VerdictClass::kAmbiguous;
  hang.group = "dp";
  hang.seq = 1306;
  const std::set<int> all = {0, 1, 2, 3, 4, 5};  // every rank recorded its timeout, n3's too
  const AttemptVerdict v = with_unreachable_host(hang, placement, {"n3"}, all);
  CHECK(v.verdict_class == VerdictClass::kNodeUnreachable);
  CHECK(v.culprit_host == "n3");
  CHECK(v.lost_ranks == std::vector<int>{4, 5});
  CHECK(v.culprit_rank == 4);
  CHECK(v.records_class == VerdictClass::kAmbiguous);
  CHECK(v.seq == 1306u);  // where it hung is kept
  CHECK_THAT(v.line(0), Catch::StartsWith("verdict attempt 0: node-unreachable host n3 (ranks 4,5) rank 4 (host n3)") &&
                            Catch::Contains("(the records alone: ambiguous)"));
  // A healthy rank on the other side named by the records (it timed out first) is overridden.
  AttemptVerdict named = hang;
  named.verdict_class = VerdictClass::kHangOutsideCollective;
  named.culprit_rank = 1;
  named.culprit_host = "n1";
  named.job_wide = true;
  const AttemptVerdict w = with_unreachable_host(named, placement, {"n3"}, all);
  CHECK(w.culprit_rank == 4);
  CHECK(w.culprit_host == "n3");
  CHECK_FALSE(w.job_wide);
  // The verdict and its probe survive the restart log's JSON.
  CHECK(test::read_back<AttemptVerdict>(v.to_json(true)) == v);

  // Unchanged but for the hosts listed: nobody unreachable, two hosts, a host not of the job, a one-host job.
  CHECK(with_unreachable_host(hang, placement, {}, all).verdict_class == VerdictClass::kAmbiguous);
  const AttemptVerdict two = with_unreachable_host(hang, placement, {"n2", "n3"}, all);
  CHECK(two.verdict_class == VerdictClass::kAmbiguous);
  CHECK(two.unreachable_hosts == std::vector<std::string>{"n2", "n3"});
  CHECK(with_unreachable_host(hang, placement, {"elsewhere"}, all).verdict_class == VerdictClass::kAmbiguous);
  RankHosts one_node;
  one_node.hosts = {"vm", "vm"};
  CHECK(with_unreachable_host(hang, one_node, {"vm"}, {0, 1}).verdict_class == VerdictClass::kAmbiguous);
  // A lost node stays a lost node: a host that is gone does not answer either.
  AttemptVerdict lost = hang;
  lost.verdict_class = VerdictClass::kNodeLost;
  lost.culprit_host = "n2";
  lost.lost_ranks = {2, 3};
  CHECK(with_unreachable_host(lost, placement, {"n2"}, all).verdict_class == VerdictClass::kNodeLost);

  // Unreachable and silent: no rank of n3 left a record while n1's did. The records alone could
  // not name one lost host (n2's ranks were ended before they wrote theirs), the probe can: n3 is
  // gone, not cut off (a cut-off node's ranks still run and record their timeout).
  const AttemptVerdict gone = with_unreachable_host(hang, placement, {"n3"}, {0, 1});
  CHECK(gone.verdict_class == VerdictClass::kNodeLost);
  CHECK(gone.culprit_host == "n3");
  CHECK(gone.lost_ranks == std::vector<int>{4, 5});
  CHECK(gone.records_class == VerdictClass::kAmbiguous);
  CHECK_THAT(gone.line(0), Catch::StartsWith("verdict attempt 0: node-lost host n3 (ranks 4,5)"));
  // One of n3's ranks recorded: cut off, not gone. Nobody recorded at all: nothing tells them apart.
  CHECK(with_unreachable_host(hang, placement, {"n3"}, {0, 1, 5}).verdict_class == VerdictClass::kNodeUnreachable);
  CHECK(with_unreachable_host(hang, placement, {"n3"}, {}).verdict_class == VerdictClass::kNodeUnreachable);
}

TEST_CASE("launch probe: a host that answers on loopback is reachable, listening or not", "[launch]") {
  // A listening socket on 127.0.0.1 (an ephemeral port), and the same port once closed: refused is
  // an answer of the host's network, so reachable too.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 4) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);
  const std::vector<HostProbe> up = probe_hosts({"127.0.0.1", "localhost"}, port, 1.0);
  REQUIRE(up.size() == 2);
  for (const HostProbe& p : up) {
    INFO(p.host << ": " << p.detail);
    CHECK(p.reach == Reachability::kReachable);
    CHECK(p.detail == "connected");
    CHECK(p.seconds < 1.0);
  }
  close(fd);
  const std::vector<HostProbe> closed = probe_hosts({"127.0.0.1"}, port, 1.0);
  CHECK(closed.at(0).reach == Reachability::kReachable);
  CHECK(closed.at(0).detail == "refused");
  CHECK(probe_hosts({}, port, 1.0).empty());
}

TEST_CASE("launch watch: a command that outlives its job's recorded failure is ended after the grace", "[launch]") {
  WatchInput in;
  in.world_size = 3;
  in.settle_s = 2.0;
  in.grace_s = 1.0;
  in.complete_grace_s = 0.25;
  in.now = 100;
  SECTION("no failure recorded: a slow job is never ended") {
    in.now = 1e9;
    const WatchDecision d = decide_watch(in);
    CHECK_FALSE(d.end);
    CHECK_FALSE(d.failed_at);
    CHECK_FALSE(d.end_at);
  }
  SECTION("every rank recorded: ended once the short grace has passed since the last record, not before") {
    in.failure_seen = {{0, 100.0}, {1, 100.4}, {2, 100.8}};
    in.now = 101.0;
    WatchDecision d = decide_watch(in);
    CHECK(d.complete);
    CHECK_FALSE(d.end);
    CHECK(*d.failed_at == 100.0);
    CHECK(*d.end_at == Approx(101.05));
    in.now = 101.05;
    CHECK(decide_watch(in).end);
  }
  SECTION("some ranks recorded: the others get the ranks' teardown grace to write theirs first") {
    in.failure_seen = {{0, 100.0}, {1, 100.4}};
    in.now = 102.9;
    WatchDecision d = decide_watch(in);
    CHECK_FALSE(d.complete);
    CHECK_FALSE(d.end);
    CHECK(*d.end_at == Approx(103.0));
    in.now = 103.0;
    CHECK(decide_watch(in).end);
  }
  SECTION("an unknown world size: the records are never taken as complete") {
    in.world_size = 0;
    in.failure_seen = {{0, 100.0}, {1, 100.0}, {2, 100.0}, {3, 100.0}};
    in.now = 101.5;
    CHECK_FALSE(decide_watch(in).end);
    CHECK_FALSE(decide_watch(in).complete);
  }
}

TEST_CASE("launch watch: timeout and error records of this attempt are failures, exit, signal and older ones are not",
          "[launch]") {
  const std::string dir = test::temp_dir("watch");
  auto record = [&](int rank, const std::string& reason, double at) {
    const nlohmann::json j = {
        {"format", "shardtrain-flight-record"}, {"format_version", 3}, {"job_id", "job-1"}, {"rank", rank},
        {"world_size", 6}, {"hostname", "node"}, {"pid", 1000 + rank}, {"code_version", "test"},
        {"reason", reason}, {"dumped_at", at}, {"timed_out_group", nullptr}, {"trigger", nullptr},
        {"triggers", nlohmann::json::array({{{"reason", reason}, {"at", at}}})}, {"phases", nlohmann::json::array()},
        {"groups", nlohmann::json::array()}, {"now", {{"phase", "backward"}, {"step", 1}, {"since", at - 1}}}};
    std::ofstream(dir + "/flight.rank" + std::to_string(rank) + ".json") << j.dump();
  };
  record(0, "timeout", 200);
  record(1, "error", 201);
  record(2, "exit", 201);       // a rank's own error: its exit status must stand
  record(3, "signal", 201);     // a dump on demand
  record(4, "timeout", 150);    // before the attempt was launched: an earlier job's
  std::ofstream(dir + "/flight.rank5.json") << "{\"format\": \"shardtrain-fl";  // being replaced: skipped
  CHECK(ranks_with_failure_records(dir, 190, {}) == std::vector<int>{0, 1});
  CHECK(ranks_with_failure_records(dir, 190, {{0, 195.0}}) == std::vector<int>{1});
  CHECK(ranks_with_failure_records(dir, 100, {}) == std::vector<int>{0, 1, 4});
}
