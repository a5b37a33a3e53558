// The scaling report (scaling/report.hpp) on hand-made summaries whose answers are worked
// out in the comments: E(W) and its formula line, strong/weak detection and the refusals, the
// step-log recomputation and its tolerance flag, the actions; and scale-bench run's argument
// handling (bench/scale_launch.hpp).
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/scaling/report.hpp"
#include "shardtrain/bench/scale_launch.hpp"
#include "shardtrain/tool/scale_bench.hpp"
#include "shardtrain/train/run_summary.hpp"

using namespace shardtrain;
using Approx = Catch::Detail::Approx;

namespace {

// Section seconds of every rank (data, fwd, bwd, exposed, opt, ckpt); step = their sum + 1 ms.
struct Times {
  double data = 0.001, fwd = 0.030, bwd = 0.060, exposed = 0.002, opt = 0.005, ckpt = 0;
};

// A run summary with the fields the report reads set (the rest at their defaults). `slow` (when
// >= 0) adds `extra_bwd` seconds of backward to that rank.
RunSummary summary_of(int world, double throughput, int global_batch, Times t = {}, int cpus = 2, int slow = -1,
                      double extra_bwd = 0) {
  RunSummary s;
  auto column = [&](const char* name, double value, bool slowed) {
    std::vector<double> v(std::size_t(world), value);
    if (slowed && slow >= 0) v[std::size_t(slow)] += extra_bwd;
    s.per_rank_medians.columns[name].by_rank = v;
  };
  const double step = t.data + t.fwd + t.bwd + t.exposed + t.opt + t.ckpt + 0.001;
  column("data_s", t.data, false);
  column("fwd_s", t.fwd, false);
  column("bwd_s", t.bwd, true);
  column("comm_exposed_s", t.exposed, false);
  column("opt_s", t.opt, false);
  column("ckpt_s", t.ckpt, false);
  column("step_s", step, true);
  s.world_size = world;
  s.throughput_tokens_per_s = throughput;
  s.median_step_s = step;
  s.config = {{"model", {{"layers", 2}, {"d_model", 32}}}, {"optimizer", {{"lr", 0.001}}}, {"global_batch", global_batch},
              {"micro_batch", 2}, {"grad_accum", 1}, {"dp_size", world}, {"zero_stage", 0}, {"seed", 1}};
  s.identity.config_hash = "h" + std::to_string(global_batch);
  s.identity.data_snapshot_id = "snap";
  s.slowest_rank = slow >= 0 ? slow : 0;
  s.host = {"test", cpus};
  s.memory_bytes_rank0.peak[std::size_t(MemoryCategory::kOptimizer)] = 100.0;
  s.memory_bytes_rank0.total = 1000.0;
  return s;
}

ScalingRun run_of(const RunSummary& summary, const std::string& dir) { return scaling_run_of(summary, dir); }

// A recomputation that agrees with the summary: tokens_per_step / step gives `throughput`.
LogThroughput logs_of(double throughput) {
  LogThroughput l;
  l.steps = 10;
  l.tokens_per_step = 256;
  l.median_step_s = 256 / throughput;
  l.throughput_tokens_per_s = throughput;
  return l;
}

bool has_action(const ScalingPoint& p, const std::string& words) {
  for (const auto& a : p.actions)
    if (a.find(words) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("E(W) = throughput_W / (W x throughput_1), with the formula line", "[scaling-report]") {
  // The PERFORMANCE.md round 1.1: 9,157 and 17,683 tokens/s -> E(2) = 17683 / 18314 = 0.96554.
  std::vector<ScalingRun> runs = {run_of(summary_of(2, 17683, 16), "w2"), run_of(summary_of(1, 9157, 8), "w1")};
  const ScalingReport r = build_scaling_report(runs);
  REQUIRE(r.runs.size() == 2);
  CHECK(r.runs[0].world_size == 1);  // sorted by W
  CHECK(r.mode == ScalingMode::kWeak);  // 8 per rank at both W
  REQUIRE(r.has_base);
  CHECK(*r.points[0].efficiency == Approx(1.0));
  CHECK(*r.points[1].speedup == Approx(17683.0 / 9157.0));
  CHECK(*r.points[1].efficiency == Approx(0.96554).epsilon(1e-4));
  CHECK(r.formula == "E(2) = 17,683 / (2 x 9,157) = 0.966");
  CHECK(thousands(1234567.4) == "1,234,567");
  CHECK(thousands(999) == "999");
}

TEST_CASE("the formula prefers a point that is not oversubscribed", "[scaling-report]") {
  // 2 CPUs: W=4 is oversubscribed, so the line quotes W=2 (E = 1800 / (2 x 1000) = 0.900).
  const ScalingReport r = build_scaling_report(
      {run_of(summary_of(1, 1000, 8), "w1"), run_of(summary_of(2, 1800, 16), "w2"), run_of(summary_of(4, 1200, 32, {0.001, 0.03, 0.06, 0.05}), "w4")});
  CHECK_FALSE(r.points[1].oversubscribed);
  CHECK(r.points[2].oversubscribed);
  CHECK(r.formula == "E(2) = 1,800 / (2 x 1,000) = 0.900");
  CHECK(has_action(r.points[2], "oversubscribed (4 ranks on a host of 2 CPUs)"));
  CHECK(r.points[2].actions.size() == 1);  // no node or batch advice from a time-shared run
  CHECK_FALSE(has_action(r.points[1], "oversubscribed"));
  const std::string md = report_markdown(r);
  CHECK(md.find("**oversubscribed** (4 ranks, 2 CPUs)") != std::string::npos);
  CHECK(report_json(r)["points"][2]["oversubscribed"] == true);
}

TEST_CASE("a run across hosts is oversubscribed by its busiest host, and its per-rank rows name their hosts", "[scaling-report]") {
  // 4 ranks on two 2-CPU hosts: 2 per host, not oversubscribed; 3 of them on one host: oversubscribed.
  RunSummary spread = summary_of(4, 1800, 32);
  spread.rank_hosts = {"n1", "n1", "n2", "n2"};
  RunSummary packed = summary_of(4, 1200, 32);
  packed.rank_hosts = {"n1", "n1", "n1", "n2"};
  const ScalingReport r = build_scaling_report({run_of(summary_of(1, 1000, 8), "w1"), run_of(spread, "spread")});
  CHECK_FALSE(r.points[1].oversubscribed);
  CHECK(report_json(r)["points"][1]["ranks"][2]["host"] == "n2");
  CHECK(report_json(r)["points"][0]["ranks"][0]["host"].is_null());  // a summary without rank_hosts
  CHECK(report_markdown(r).find("| 4 | 3 (n2) |") != std::string::npos);
  const ScalingReport q = build_scaling_report({run_of(summary_of(1, 1000, 8), "w1"), run_of(packed, "packed")});
  CHECK(q.points[1].oversubscribed);
  CHECK(has_action(q.points[1], "oversubscribed (3 ranks on a host of 2 CPUs)"));
}

TEST_CASE("strong, weak, and the runs that do not belong together", "[scaling-report]") {
  SECTION("one global batch is strong scaling") {
    CHECK(build_scaling_report({run_of(summary_of(1, 1000, 8), "a"), run_of(summary_of(2, 1900, 8), "b")}).mode ==
          ScalingMode::kStrong);
  }
  SECTION("neither one global batch nor one per-rank batch: UsageError naming the folders") {
    // W=1 batch 8, W=2 batch 8 (strong), W=4 batch 32 (weak): a mix.
    try {
      build_scaling_report({run_of(summary_of(1, 1000, 8), "runA"), run_of(summary_of(2, 1900, 8), "runB"),
                            run_of(summary_of(4, 3000, 32), "runC")});
      FAIL("no error");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK(what.find("runA") != std::string::npos);
      CHECK(what.find("runC (W=4, global batch 32)") != std::string::npos);
    }
  }
  SECTION("another model: UsageError naming both folders and the key") {
    auto other = summary_of(2, 1900, 16);
    other.config["model"]["layers"] = 4;
    try {
      build_scaling_report({run_of(summary_of(1, 1000, 8), "small"), run_of(other, "big")});
      FAIL("no error");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK(what.find("small and big") != std::string::npos);
      CHECK(what.find("model differs") != std::string::npos);
    }
  }
  SECTION("two runs at one W") {
    CHECK_THROWS_AS(build_scaling_report({run_of(summary_of(2, 1000, 8), "a"), run_of(summary_of(2, 1000, 8), "b")}),
                    UsageError);
  }
  SECTION("a summary without the per-rank medians is refused by name") {
    auto bad = summary_of(1, 1000, 8);
    bad.per_rank_medians.columns.clear();
    CHECK_THROWS_WITH(run_of(bad, "broken"), Catch::Contains("broken/summary.json") && Catch::Contains("per_rank_medians"));
  }
  SECTION("no W = 1 run: no speedup, no E, said so") {
    const ScalingReport r = build_scaling_report({run_of(summary_of(2, 1900, 16), "b"), run_of(summary_of(4, 3000, 32), "c")});
    CHECK_FALSE(r.has_base);
    CHECK_FALSE(r.points[0].efficiency.has_value());
    CHECK(r.formula.empty());
    CHECK(report_markdown(r).find("No W=1 run") != std::string::npos);
    CHECK(report_json(r)["points"][0]["efficiency"].is_null());
  }
}

TEST_CASE("the step-log recomputation: summed tokens, slowest rank, steady steps", "[scaling-report]") {
  auto rec = [](std::int64_t step, double tokens, double step_s) {
    StepLogEntry e;
    e.record.step = step;
    e.record.tokens = std::int64_t(tokens);
    e.record.step_s = step_s;
    e.has_tokens = e.has_timings = true;
    return e;
  };
  // Two ranks, 128 tokens each per step. Step 0 (warm-up, dropped: 5 common steps > 3) is slow.
  // Per-step slowest: 0.30 | 0.10, 0.12, 0.11, 0.10 -> median of the four = 0.105.
  // Step 5 exists on rank 0 only and is left out (it would otherwise move the median).
  std::vector<std::vector<StepLogEntry>> ranks = {
      {rec(0, 128, 0.30), rec(1, 128, 0.10), rec(2, 128, 0.12), rec(3, 128, 0.10), rec(4, 128, 0.10), rec(5, 128, 9.0)},
      {rec(0, 128, 0.20), rec(1, 128, 0.09), rec(2, 128, 0.11), rec(3, 128, 0.11), rec(4, 128, 0.09)}};
  const auto l = throughput_from_records(ranks);
  REQUIRE(l);
  CHECK(l->steps == 4);
  CHECK(l->tokens_per_step == Approx(256));
  CHECK(l->median_step_s == Approx(0.105));
  CHECK(l->throughput_tokens_per_s == Approx(256 / 0.105));
  CHECK_FALSE(throughput_from_records({{}}).has_value());
}

TEST_CASE("a recomputation outside the tolerance is flagged", "[scaling-report]") {
  auto one = run_of(summary_of(1, 1000, 8), "w1");
  auto two = run_of(summary_of(2, 1900, 16), "w2");
  one.from_logs = logs_of(1000 * 1.01);  // 1% off: inside 5%
  SECTION("inside") {
    two.from_logs = logs_of(1900 * 0.98);
    const auto r = build_scaling_report({one, two});
    CHECK(r.points[1].within_tolerance);
    // E from logs = 1862 / (2 x 1010) = 0.92178; E = 0.95; deviation 2.97%.
    CHECK(*r.points[1].log_efficiency == Approx(1862.0 / 2020.0));
    CHECK(*r.points[1].efficiency_deviation == Approx(std::abs(1862.0 / 2020.0 - 0.95) / 0.95));
  }
  SECTION("outside: the logs say half the tokens (a wrong throughput in the summary)") {
    two.from_logs = logs_of(950);
    const auto r = build_scaling_report({one, two});
    CHECK_FALSE(r.points[1].within_tolerance);
    CHECK(r.points[0].within_tolerance);
    CHECK(report_markdown(r).find("**OUTSIDE tolerance**") != std::string::npos);
  }
}

TEST_CASE("an action per row from what limits it", "[scaling-report]") {
  const auto base = run_of(summary_of(1, 1000, 8), "w1");
  SECTION("exposed communication -> bucket size and overlap") {
    Times t;
    t.exposed = 0.030;  // 30 ms of a 127 ms step: 24%
    const auto r = build_scaling_report({base, run_of(summary_of(2, 1500, 16, t), "w2")});
    CHECK(has_action(r.points[1], "--bucket-mb"));
    CHECK(r.points[1].exposed_comm_share == Approx(0.030 / 0.127));
    CHECK_FALSE(has_action(r.points[0], "--bucket-mb"));
  }
  SECTION("a straggler -> replace its node, with its section") {
    // Rank 1 has 60 ms more backward: compute 0.157 vs the ranks' median (0.097 + 0.157) / 2 = 0.127.
    const auto r = build_scaling_report({base, run_of(summary_of(2, 1500, 16, {}, 2, 1, 0.060), "w2")});
    CHECK(r.runs[1].slowest_rank == 1);
    CHECK(r.points[1].slowest_section == "backward");
    CHECK(has_action(r.points[1], "replace its node"));
  }
  SECTION("a network straggler in the summary -> check that node's link, named with its rate") {
    auto s = summary_of(2, 1900, 16);
    s.network_stragglers.stragglers.push_back({"node4", {3}, 2.48e6, 255e6, 25, 13});
    const auto r = build_scaling_report({base, run_of(s, "w2")});
    CHECK(r.runs[1].network_stragglers == std::vector<std::string>{"host node4 at 2.48 MB/s against 255 MB/s"});
    CHECK(has_action(r.points[1], "network straggler host node4 at 2.48 MB/s"));
    CHECK_FALSE(has_action(r.points[0], "network straggler"));
  }
  SECTION("optimizer memory -> ZeRO stage") {
    auto s = summary_of(2, 1900, 16);
    s.memory_bytes_rank0.peak[std::size_t(MemoryCategory::kOptimizer)] = 500.0;  // 50% of 1000 > 30%
    const auto r = build_scaling_report({base, run_of(s, "w2")});
    CHECK(has_action(r.points[1], "--zero-stage"));
  }
  SECTION("small per-rank batch -> more accumulation") {
    // Strong scaling at global batch 4: W=2 gets 2 samples per rank (< 4).
    const auto r = build_scaling_report({run_of(summary_of(1, 1000, 4), "w1"), run_of(summary_of(2, 1900, 4), "w2")});
    CHECK(has_action(r.points[1], "per-rank batch 2 samples"));
    CHECK_FALSE(has_action(r.points[0], "per-rank batch"));
  }
  SECTION("nothing above a threshold and E >= 0.9") {
    const auto r = build_scaling_report({base, run_of(summary_of(2, 1950, 16), "w2")});
    REQUIRE(r.points[1].actions.size() == 1);
    CHECK(has_action(r.points[1], "none"));
  }
}

TEST_CASE("scale-bench run: --workers and the weak-scaling batch", "[scaling-report]") {
  CHECK(parse_workers("1,2,4") == std::vector<int>{1, 2, 4});
  CHECK_THROWS_AS(parse_workers("0"), UsageError);
  CHECK_THROWS_AS(parse_workers("1,,2"), UsageError);
  CHECK_THROWS_AS(parse_workers("1,x"), UsageError);
  CHECK_THROWS_AS(parse_workers("2,2"), UsageError);
  CHECK_THROWS_AS(parse_workers(""), UsageError);
  ScaleRunOptions o;
  o.workers = {1, 2, 4};
  o.out_dir = "out";
  o.train_args = {"--steps", "5", "--global-batch", "8"};
  const auto argv = launch_argv(o, 4, "/bin", 2);
  CHECK(argv == std::vector<std::string>{"mpirun", "-np", "4", "--oversubscribe", "/bin/ddp-train", "--steps", "5",
                                         "--global-batch", "32", "--run-dir", "out/w4"});
  CHECK(launch_argv(o, 2, "/bin", 2)[3] == "/bin/ddp-train");  // 2 ranks on 2 CPUs: no --oversubscribe
  o.strong = true;
  CHECK(train_args_for(o, 4)[3] == "8");
  o.strong = false;
  o.train_args = {"--global-batch=6"};
  o.workers = {4, 2, 3};
  CHECK(train_args_for(o, 2)[0] == "--global-batch=3");  // 6 x 2 / 4
  CHECK_THROWS_AS(train_args_for(o, 3), UsageError);     // 6 x 3 / 4 = 4.5 samples
  o.train_args = {"--steps", "5"};
  CHECK_THROWS_WITH(train_args_for(o, 2), Catch::Contains("give --global-batch"));
}

TEST_CASE("scale-bench run: TRAIN-ARGS after -- reach the trainer, --model NAME among them", "[scaling-report]") {
  // Parsed only (the subcommand's body, which launches, is not called): run's own options end at
  // --, so the trainer's --model NAME is no clash with run's --step-model FILE.
  CLI::App app{"scale-bench"};
  const scale_bench::Subcommand run = scale_bench::add_run_command(app);
  std::vector<std::string> args = {"run", "--workers", "1,2", "--step-model", "m.json", "--",
                                   "--model", "gpt2-small", "--global-batch", "2"};
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  app.parse(args);
  REQUIRE(run.app->parsed());
  CHECK(run.app->get_option("--step-model")->as<std::string>() == "m.json");
  CHECK(run.app->count("--model") == 0);
  ScaleRunOptions o;
  o.workers = parse_workers(run.app->get_option("--workers")->as<std::string>());
  o.train_args = run.app->get_option("train-args")->results();
  CHECK(o.train_args == std::vector<std::string>{"--model", "gpt2-small", "--global-batch", "2"});
  CHECK(launch_argv(o, 2, "/bin", 2) == std::vector<std::string>{"mpirun", "-np", "2", "/bin/ddp-train", "--model",
                                                                 "gpt2-small", "--global-batch", "4", "--run-dir", "./w2"});
}

TEST_CASE("communication by link: a hierarchical run's intra- and inter-node time per step", "[scaling-report]") {
  RunSummary flat = summary_of(4, 1000, 8);
  flat.steps = 10;
  flat.communication.dp.all_reduce_algorithm = "halving";
  flat.communication.dp.per_op[int(CollectiveOp::kAllReduce)].busy_s = 2.0;
  RunSummary h = summary_of(1, 300, 8);
  h.steps = 10;
  CommStats& hc = h.communication.dp;
  hc.all_reduce_algorithm = "hierarchical";
  hc.levels = {{"dp.node", false, {}}, {"dp.cross", true, {}}};
  hc.levels[0].stats.per_op[int(CollectiveOp::kReduceScatter)].busy_s = 0.25;  // intra-node: 0.5 s in all
  hc.levels[0].stats.per_op[int(CollectiveOp::kAllGather)].busy_s = 0.25;
  hc.levels[1].stats.per_op[int(CollectiveOp::kAllReduce)].busy_s = 1.5;  // inter-node
  hc.nodes = 2;
  hc.ranks_per_node = 2;
  const ScalingRun fr = run_of(flat, "flat");
  CHECK_FALSE(fr.hierarchical);
  CHECK(fr.allreduce_algorithm == "halving");
  const ScalingRun hr = run_of(h, "hier");
  CHECK(hr.hierarchical);
  CHECK(hr.nodes == 2);
  CHECK(hr.ranks_per_node == 2);
  CHECK(hr.intra_node_s_per_step == Approx(0.05));
  CHECK(hr.inter_node_s_per_step == Approx(0.15));
  const ScalingReport report = build_scaling_report({hr, fr});
  const std::string md = report_markdown(report);
  CHECK(md.find("| 4 | halving | - | halving (flat) | - | - | - | - |") != std::string::npos);
  CHECK(md.find("| 1 | hierarchical | 2 x 2 | hierarchical (every bucket of >= ranks-per-node elements) | 50.00 | 150.00 |") !=
        std::string::npos);
  const nlohmann::json j = report_json(report);
  CHECK(j["points"][0]["communication"]["inter_node_s_per_step"] == Approx(0.15));
  // --allreduce auto --step-model: the buckets from the model's threshold went two levels.
  RunSummary a = h;
  a.communication.dp.hierarchical_from_bytes = {{CollectiveOp::kAllReduce, 2223},
                                               {CollectiveOp::kReduceScatter, kNeverHierarchical}};
  const ScalingRun ar = run_of(a, "auto");
  CHECK(ar.chosen_by_size);
  REQUIRE(ar.all_reduce_hierarchical_from);
  CHECK(*ar.all_reduce_hierarchical_from == 2223);
  CHECK(report_markdown(build_scaling_report({ar})).find("| auto: hierarchical from 2223 bytes, flat below |") !=
        std::string::npos);
  a.communication.dp.hierarchical_from_bytes[0].second = kNeverHierarchical;  // only ZeRO's operations went two levels
  CHECK(report_markdown(build_scaling_report({run_of(a, "auto")})).find("auto: flat") != std::string::npos);
}
