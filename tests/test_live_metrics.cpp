// The live metrics (issue 49): the port rule and the service-discovery file (telemetry/
// scrape_targets.hpp), the trainer's collectable (train/live_metrics.hpp) with the age of a
// collective in flight computed at each scrape from the flight recorder, and the endpoint
// (telemetry/metrics_endpoint.hpp): it serves what the collectable says over HTTP, and a port in
// use is a UsageError naming the address.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/launch/launcher_metrics.hpp"
#include "shardtrain/telemetry/metrics_endpoint.hpp"
#include "shardtrain/telemetry/scrape_targets.hpp"
#include "shardtrain/train/live_metrics.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

// The one series of `name` whose labels include `labels` (found false when there is none).
struct Sample {
  bool found = false;
  double value = 0;
  std::map<std::string, std::string> labels;
};
Sample sample_of(const std::vector<prometheus::MetricFamily>& families, const std::string& name,
                 const std::map<std::string, std::string>& labels = {}) {
  Sample out;
  for (const auto& f : families) {
    if (f.name != name) continue;
    for (const auto& m : f.metric) {
      std::map<std::string, std::string> have;
      for (const auto& l : m.label) have[l.name] = l.value;
      bool match = true;
      for (const auto& [k, v] : labels) match &= have.count(k) && have[k] == v;
      if (!match) continue;
      REQUIRE_FALSE(out.found);  // one series
      out = {true, m.gauge.value, have};
    }
  }
  return out;
}

LiveMetricsConfig config_for(int world_rank) {
  LiveMetricsConfig c;
  c.labels = {{"train_job", "j1"}, {"run_dir", "/runs/a"}, {"rank", std::to_string(world_rank)}, {"host", "node7"}};
  c.world_rank = world_rank;
  c.steps_planned = 100;
  c.collective_timeout_s = 30;
  c.checkpoint_every = 10;
  c.straggler_threshold = 0.75;
  return c;
}

// A listening TCP socket on a free loopback port (the port in use), closed on destruction.
struct Listener {
  int fd = -1, port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
};

// The body of GET /metrics from 127.0.0.1:port (HTTP/1.0: the server closes when done).
std::string http_get_metrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(std::uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  REQUIRE(write(fd, request.data(), request.size()) == ssize_t(request.size()));
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, std::size_t(n));
  close(fd);
  return response;
}

}  // namespace

TEST_CASE("scrape targets: rank r serves on PORT + its local rank, by host", "[metrics]") {
  const std::vector<std::string> hosts = {"a", "a", "b", "b", "a"};
  std::vector<int> ports;
  for (int r = 0; r < 5; ++r) ports.push_back(metrics_port_of(9400, hosts, r));
  CHECK(ports == std::vector<int>{9400, 9401, 9400, 9401, 9402});
  CHECK(scrape_host_of("127.0.0.1", "a") == "127.0.0.1");
  CHECK(scrape_host_of("0.0.0.0", "a") == "a");
  CHECK(scrape_host_of("", "b") == "b");
}

TEST_CASE("scrape targets: the discovery file is Prometheus file_sd JSON, one object per rank", "[metrics]") {
  const std::string dir = test::temp_dir("scrape_targets");
  write_scrape_targets(dir, {{"127.0.0.1:9400", {{"rank", "0"}, {"host", "a"}}}, {"127.0.0.1:9401", {{"rank", "1"}, {"host", "a"}}}});
  std::ifstream in(scrape_targets_path(dir));
  const nlohmann::json j = nlohmann::json::parse(in);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 2);
  CHECK(j[1]["targets"] == nlohmann::json::array({"127.0.0.1:9401"}));
  CHECK(j[1]["labels"]["rank"] == "1");
  CHECK(j[0]["labels"]["host"] == "a");
  // Rewritten whole at a restart: a smaller world leaves no stale target behind.
  write_scrape_targets(dir, {{"127.0.0.1:9400", {{"rank", "0"}}}});
  std::ifstream again(scrape_targets_path(dir));
  CHECK(nlohmann::json::parse(again).size() == 1);
}

TEST_CASE("live metrics: a step's values, with the job's labels on every series", "[metrics]") {
  LiveMetrics m(config_for(1001));
  CHECK_FALSE(sample_of(m.Collect(), "shardtrain_step").found);  // nothing before the first step
  StepRecord r;
  r.step = 41;
  r.step_s = 0.5;
  r.data_s = 0.01;
  r.fwd_s = 0.1;
  r.bwd_s = 0.2;
  r.opt_s = 0.05;
  r.comm_exposed_s = 0.03;
  r.loss = 3.25;
  r.lr = 1e-3;
  r.grad_norm = 0.8;
  m.record_step(r, 1234.0, 0.42);
  // Two more steps: the median of 0.5, 0.7 and 0.1 s is 0.5 s.
  r.step = 42, r.step_s = 0.7;
  m.record_step(r, 1234.0, 0.42);
  r.step = 43, r.step_s = 0.1, r.loss = std::numeric_limits<double>::quiet_NaN();
  m.record_step(r, 1000.0, 0.4);
  const auto f = m.Collect();
  CHECK(sample_of(f, "shardtrain_step").value == 44);
  CHECK(sample_of(f, "shardtrain_step_median_seconds").value == 0.5);
  CHECK(sample_of(f, "shardtrain_tokens_per_second").value == 1000.0);
  CHECK(sample_of(f, "shardtrain_loss_finite").value == 0);
  CHECK(sample_of(f, "shardtrain_step_section_seconds", {{"section", "compute"}}).value == Approx(0.35));
  CHECK(sample_of(f, "shardtrain_step_section_seconds", {{"section", "comm_exposed"}}).value == 0.03);
  CHECK(sample_of(f, "shardtrain_steps_planned").value == 100);
  for (const auto& family : f)
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& l : metric.label) have[l.name] = l.value;
      CHECK(have["rank"] == "1001");
      CHECK(have["host"] == "node7");
      CHECK(have["run_dir"] == "/runs/a");
    }
  m.record_checkpoint(40, 1.5, 4096);
  const Sample ckpt = sample_of(m.Collect(), "shardtrain_checkpoint_step");
  CHECK(ckpt.found);
  CHECK(ckpt.value == 40);
}

TEST_CASE("live metrics: every straggler score is served, shardtrain_straggler_named only for this rank's findings", "[metrics]") {
  LiveMetrics m(config_for(1));
  StragglerReport report;
  report.threshold = 0.75;
  RankScores mine;
  mine.rank = 1;
  mine.sections[std::size_t(Section::kData)].relative = 0.1;      // low and named below
  mine.sections[std::size_t(Section::kBackward)].relative = 0.5;  // low, not named (a tiny section)
  mine.sections[std::size_t(Section::kForward)].individual = 0.9;
  RankScores other;
  other.rank = 0;
  report.ranks = {other, mine};
  report.stragglers = {{1, Section::kData, false, 0.1, 0.04, ""}, {0, Section::kForward, true, 0.6, 0.02, ""}};
  m.record_stragglers(report);
  auto f = m.Collect();
  CHECK(sample_of(f, "shardtrain_straggler_score", {{"section", "backward"}, {"score", "relative"}}).value == 0.5);
  CHECK(sample_of(f, "shardtrain_straggler_score", {{"section", "forward"}, {"score", "individual"}}).value == 0.9);
  const Sample named = sample_of(f, "shardtrain_straggler_named");  // one series: rank 0's finding is not ours
  REQUIRE(named.found);
  CHECK(named.value == 0.1);
  CHECK(named.labels.at("section") == "data");
  CHECK(named.labels.at("score") == "relative");
  // The next live check names nothing: the series goes (Prometheus marks it stale), the scores stay.
  report.stragglers.clear();
  m.record_stragglers(report);
  f = m.Collect();
  CHECK_FALSE(sample_of(f, "shardtrain_straggler_named").found);
  CHECK(sample_of(f, "shardtrain_straggler_score", {{"section", "data"}, {"score", "relative"}}).value == 0.1);
}

TEST_CASE("launcher metrics: attempts, restarts, world size and the last verdict's class, culprit rank and host", "[metrics]") {
  launch::LauncherMetrics m({{"run_dir", "/runs/b"}, {"host", "login1"}});
  auto f = m.Collect();
  CHECK(sample_of(f, "shardtrain_launcher_restarts").value == 0);
  CHECK(sample_of(f, "shardtrain_launcher_running").value == 0);
  CHECK_FALSE(sample_of(f, "shardtrain_launcher_last_verdict").found);
  CHECK_FALSE(sample_of(f, "shardtrain_launcher_last_exit_status").found);
  CHECK(sample_of(f, "shardtrain_launcher_start_timestamp_seconds").value > 1.6e9);
  m.attempt_started(0, 4);
  CHECK(sample_of(m.Collect(), "shardtrain_launcher_running").value == 1);
  m.attempt_ended(137);
  launch::AttemptVerdict v;
  v.verdict_class = launch::VerdictClass::kNodeLost;
  v.culprit_rank = 2;
  v.culprit_host = "node3";
  m.judged(0, v, 1.8e9);
  m.hosts_excluded(1);
  m.attempt_started(1, 2);  // an elastic restart on the ranks left
  f = m.Collect();
  CHECK(sample_of(f, "shardtrain_launcher_attempt").value == 1);
  CHECK(sample_of(f, "shardtrain_launcher_restarts").value == 1);
  CHECK(sample_of(f, "shardtrain_launcher_world_size").value == 2);
  CHECK(sample_of(f, "shardtrain_launcher_running").value == 1);
  CHECK(sample_of(f, "shardtrain_launcher_last_exit_status").value == 137);
  CHECK(sample_of(f, "shardtrain_launcher_excluded_hosts").value == 1);
  const Sample verdict = sample_of(f, "shardtrain_launcher_last_verdict");
  REQUIRE(verdict.found);
  CHECK(verdict.value == 1.8e9);
  CHECK(verdict.labels.at("verdict_class") == "node-lost");
  CHECK(verdict.labels.at("culprit_rank") == "2");
  CHECK(verdict.labels.at("culprit_host") == "node3");
  CHECK(verdict.labels.at("attempt") == "0");
  CHECK(verdict.labels.at("run_dir") == "/runs/b");
  // A job-wide error names no rank.
  v.verdict_class = launch::VerdictClass::kErrorExit;
  v.job_wide = true;
  v.culprit_host = "";
  m.judged(1, v, 1.9e9);
  const Sample wide = sample_of(m.Collect(), "shardtrain_launcher_last_verdict");  // one series: the last verdict only
  CHECK(wide.labels.at("culprit_rank") == "");
  CHECK(wide.labels.at("attempt") == "1");
}

TEST_CASE("live metrics: the oldest collective in flight ages at each scrape, gone once completed", "[metrics]") {
  const int world_rank = 1002;  // a rank no other test registers groups for
  LiveMetrics m(config_for(world_rank));
  FlightGroup group;
  group.name = "dp", group.rank = 0, group.size = 2, group.world_ranks = {1002, 1003};
  auto recorder = register_flight_recorder(world_rank, group, 16);
  CHECK_FALSE(sample_of(m.Collect(), "shardtrain_collective_in_flight_age_seconds").found);
  FlightEntry done;
  done.seq = 1, done.op = CollectiveOp::kBroadcast, done.group = "dp";
  recorder->mark(recorder->record(done), FlightState::kCompleted);
  FlightEntry e;
  e.seq = 2, e.op = CollectiveOp::kAllReduce, e.group = "dp";
  const std::uint64_t ticket = recorder->record(e);
  recorder->mark(ticket, FlightState::kStarted);
  const Sample first = sample_of(m.Collect(), "shardtrain_collective_in_flight_age_seconds");
  REQUIRE(first.found);
  CHECK(first.labels.at("comm_group") == "dp");
  CHECK(first.labels.at("seq") == "2");
  CHECK(first.labels.at("op") == op_name(CollectiveOp::kAllReduce));
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  // No step finished meanwhile: the age moved at scrape time alone.
  const Sample later = sample_of(m.Collect(), "shardtrain_collective_in_flight_age_seconds");
  REQUIRE(later.found);
  CHECK(later.value - first.value >= 0.1);
  recorder->mark(ticket, FlightState::kCompleted);
  CHECK_FALSE(sample_of(m.Collect(), "shardtrain_collective_in_flight_age_seconds").found);
  retire_flight_recorder(recorder.get());
}

TEST_CASE("metrics endpoint: serves the collectable over HTTP, and a port in use is a UsageError naming it", "[metrics]") {
  auto metrics = std::make_shared<LiveMetrics>(config_for(1004));
  StepRecord r;
  r.step = 6, r.step_s = 0.25, r.loss = 2.5;
  metrics->record_step(r, 10.0, 0.1);
  int port = 0;
  {
    const Listener probe;  // a free port, released for the endpoint
    port = probe.port;
  }
  {
    const MetricsEndpoint endpoint("127.0.0.1", port, metrics);
    const std::string body = http_get_metrics(port);
    CHECK(body.find("200 OK") != std::string::npos);
    CHECK(body.find("shardtrain_step{") != std::string::npos);
    CHECK(body.find("rank=\"1004\"") != std::string::npos);
    CHECK(body.find("} 7") != std::string::npos);  // shardtrain_step: 7 steps completed
  }
  const Listener taken;
  try {
    MetricsEndpoint endpoint("127.0.0.1", taken.port, metrics);
    FAIL("bound a port in use");
  } catch (const UsageError& e) {
    const std::string what = e.what();
    CHECK(what.find("127.0.0.1:" + std::to_string(taken.port)) != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);  // one line
  }
  CHECK_THROWS_AS(MetricsEndpoint("127.0.0.1", 0, metrics), UsageError);
}
