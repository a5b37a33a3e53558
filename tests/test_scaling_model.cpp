// The alpha-beta step model (stepmodel/step_model.hpp, two_level.hpp) and scale-bench fit/predict/plan
// (scaling/fit.hpp, plan.hpp, prediction.hpp).
#include <catch2/catch.hpp>

#include <algorithm>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/scaling/fit.hpp"
#include "shardtrain/scaling/option_text.hpp"
#include "shardtrain/scaling/plan.hpp"
#include "shardtrain/scaling/prediction.hpp"
#include "shardtrain/scaling/seed_lab.hpp"
#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/stepmodel/sweep.hpp"
#include "shardtrain/stepmodel/two_level.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/tool/scale_bench.hpp"
#include "shardtrain/tool/train_cli.hpp"
#include "shardtrain/tool/tool.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace shardtrain;
using namespace shardtrain::scaling;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("shardtrain_scaling_model_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

// Gaussian noise of relative standard deviation `sigma`, from the raw (portable) mt19937 stream.
struct Noise {
  std::mt19937 gen;
  double sigma;
  Noise(std::uint32_t seed, double s) : gen(seed), sigma(s) {}
  double uniform() { return (double(gen()) + 0.5) / 4294967296.0; }
  double factor() {
    const double z = std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
    return 1 + sigma * z;
  }
};

// Runs scale-bench's subcommands in-process (the tool's own run_tool): the exit code.
int run_scale_bench(std::vector<std::string> args) {
  namespace sb = shardtrain::scale_bench;
  CLI::App app{"scale-bench", "scale-bench"};
  app.require_subcommand(1);
  const std::vector<sb::Subcommand> commands = {sb::add_fit_command(app), sb::add_predict_command(app),
                                                sb::add_plan_command(app)};
  args.insert(args.begin(), "scale-bench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return run_tool(app, int(argv.size()), argv.data(), {}, [&] {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
    return 99;
  });
}

}  // namespace

TEST_CASE("seed-lab: the model reproduces the lab's speedups within 1% at every W", "[scaling-model]") {
  const StepModel m = seed_lab_model();
  for (const auto& [w, lab] : seed_lab_speedups()) {
    const StepTerms t = predict(m, w);
    INFO("W = " << w << ": model " << t.speedup << "x, lab " << lab << "x");
    CHECK(std::fabs(t.speedup / lab - 1) < 0.01);
    CHECK(t.efficiency == Approx(t.speedup / w));
  }
  // The straggler term is needed: without it W = 16 misses by more than 1%.
  StepModel no_straggler = m;
  no_straggler.straggler = 0;
  CHECK(std::fabs(predict(no_straggler, 16).speedup / 13.2 - 1) > 0.01);
  // And the latency term: without alpha W = 16 misses by more than 1%.
  StepModel no_alpha = m;
  no_alpha.alpha_s = 0;
  CHECK(std::fabs(predict(no_alpha, 16).speedup / 13.2 - 1) > 0.01);
}

TEST_CASE("predict: the terms of one small case worked by hand", "[scaling-model]") {
  StepModel m;
  m.compute_s = 0.1;
  m.scaling = Scaling::kWeak;
  m.tokens_per_step = 1000;
  m.collectives = {{CollectiveOp::kAllReduce, 1e9, 1}, {CollectiveOp::kAllGather, 4e8, 2}};
  m.busbw_Bps = 1e10;
  m.alpha_s = 1e-5;
  m.overlap = 0.5;
  m.straggler = 0.1;
  m.forward_share = 0.3;
  m.backward_share = 0.6;
  const StepTerms t = predict(m, 4);
  // all-reduce: 2(3)/4 x 1e9 / 1e10 + 2(3) x 1e-5 = 0.15 + 0.00006; all-gather twice: 2 x (3/4 x 0.04 + 3e-5)
  CHECK(t.comm_s == Approx(0.15006 + 2 * 0.03003).epsilon(1e-12));
  // Both behind backward (the default phase), and they outlast its 0.6 x 0.1 s: all but 0.06 s is
  // exposed, more than the overlap's floor 0.5 x 0.21012.
  CHECK(t.exposed_comm_s == Approx(0.21012 - 0.06).epsilon(1e-12));
  CHECK(t.compute_s == Approx(0.1));
  CHECK(t.straggler_s == Approx(0.1 * 0.1 * 2).epsilon(1e-12));
  CHECK(t.step_s == Approx(0.1 + 0.15012 + 0.02).epsilon(1e-12));
  CHECK(t.tokens_per_s == Approx(4000 / 0.27012).epsilon(1e-12));
  CHECK(t.speedup == Approx((4000 / 0.27012) / (1000 / 0.1)).epsilon(1e-12));
  CHECK(t.efficiency == Approx(t.speedup / 4).epsilon(1e-12));
  // The all-gathers behind forward instead: forward hides 0.03 of their 0.06006, backward 0.06 of
  // the all-reduce's 0.15006: 0.03006 + 0.09006 exposed, still above the floor 0.10506.
  m.collectives[1].phase = CommPhase::kForward;
  CHECK(predict(m, 4).exposed_comm_s == Approx(0.03006 + 0.09006).epsilon(1e-12));
  // Ten times the compute: both passes outlast their communication, the floor is what shows.
  m.compute_s = 1.0;
  CHECK(predict(m, 4).exposed_comm_s == Approx(0.5 * 0.21012).epsilon(1e-12));
  m.compute_s = 0.1;
  m.collectives[1].phase = CommPhase::kBackward;
  const StepTerms one = predict(m, 1);  // no communication, no straggler at one rank
  CHECK(one.step_s == Approx(0.1));
  CHECK(one.speedup == Approx(1.0));
  m.scaling = Scaling::kStrong;  // the batch divided: compute 0.025 at W = 4, tokens stay 1000
  const StepTerms s = predict(m, 4);
  CHECK(s.compute_s == Approx(0.025));
  CHECK(s.step_s == Approx(0.025 + (0.21012 - 0.6 * 0.025) + 0.025 * 0.2).epsilon(1e-12));
  CHECK(s.speedup == Approx((1000 / s.step_s) / (1000 / 0.1)).epsilon(1e-12));
}

TEST_CASE("predict: two levels, a 2 x 2 topology worked by hand, flat against hierarchical", "[scaling-model]") {
  StepModel m;
  m.compute_s = 0.1;
  m.tokens_per_step = 1000;
  m.collectives = {{CollectiveOp::kAllReduce, 4e6, 4}, {CollectiveOp::kAllReduce, 1e3, 2}};
  m.busbw_Bps = 1e8;  // the flat rows' fit (across nodes: the slow link shows)
  m.alpha_s = 1e-5;
  m.intra = {1e9, 2e-6};
  m.inter = {1e8, 2e-5};
  const Topology t{2, 2};
  // Flat, 4 MB: 2(3)/4 x 4e6 / 1e8 + 6 x 1e-5 = 0.06006 s, all of it counted inter-node.
  const CollectiveCost flat = collective_cost(m, CollectiveOp::kAllReduce, 4e6, t, CommLayout::kFlat);
  CHECK(flat.seconds == Approx(0.06006).epsilon(1e-12));
  CHECK(flat.inter_s == Approx(0.06006).epsilon(1e-12));
  CHECK_FALSE(flat.hierarchical);
  // Hierarchical: reduce-scatter and all-gather over 2 ranks on intra (each 1/2 x 4e6 / 1e9 + 1 x
  // 2e-6 = 0.002002), all-reduce of 2e6 bytes over 2 nodes on inter (2/2 x 2e6 / 1e8 + 2 x 2e-5).
  const CollectiveCost h = collective_cost(m, CollectiveOp::kAllReduce, 4e6, t, CommLayout::kHierarchical);
  CHECK(h.intra_s == Approx(2 * 0.002002).epsilon(1e-12));
  CHECK(h.inter_s == Approx(0.02 + 4e-5).epsilon(1e-12));
  CHECK(h.seconds == Approx(0.004004 + 0.02004).epsilon(1e-12));
  CHECK(h.hierarchical);
  // Auto takes the cheaper per call: hierarchical for 4 MB here; on one node always flat.
  CHECK(collective_cost(m, CollectiveOp::kAllReduce, 4e6, t, CommLayout::kAuto).hierarchical);
  CHECK_FALSE(collective_cost(m, CollectiveOp::kAllReduce, 4e6, Topology{1, 4}, CommLayout::kAuto).hierarchical);
  // One node: the intra link, flat, whatever the layout.
  CHECK(collective_cost(m, CollectiveOp::kAllReduce, 4e6, Topology{1, 4}, CommLayout::kHierarchical).seconds ==
        Approx(1.5 * 4e6 / 1e9 + 6 * 2e-6).epsilon(1e-12));
  // Reduce-scatter of W blocks: (L-1)/L x bytes on intra, then (N-1)/N x bytes / L on inter.
  const CollectiveCost rs = collective_cost(m, CollectiveOp::kReduceScatter, 4e6, t, CommLayout::kHierarchical);
  CHECK(rs.intra_s == Approx(0.5 * 4e6 / 1e9 + 2e-6).epsilon(1e-12));
  CHECK(rs.inter_s == Approx(0.5 * 2e6 / 1e8 + 2e-5).epsilon(1e-12));
  // The step: the terms add up by link.
  std::vector<std::string> choices;
  const StepTerms terms = predict_on(m, t, CommLayout::kHierarchical, &choices);
  const double small_h = collective_cost(m, CollectiveOp::kAllReduce, 1e3, t, CommLayout::kHierarchical).seconds;
  CHECK(terms.comm_s == Approx(4 * h.seconds + 2 * small_h).epsilon(1e-12));
  CHECK(terms.intra_comm_s + terms.inter_comm_s == Approx(terms.comm_s).epsilon(1e-12));
  REQUIRE(choices.size() == 2);
  CHECK(choices[0].find("hierarchical") != std::string::npos);
  // Without the two links the hierarchical layout cannot be priced.
  StepModel one_level = m;
  one_level.inter = {};
  CHECK_THROWS_WITH(collective_cost(one_level, CollectiveOp::kAllReduce, 4e6, t, CommLayout::kHierarchical),
                    Catch::Contains("needs both links"));
  CHECK(parse_topologies("2x2,3x1").size() == 2);
  CHECK(parse_topologies("3x2")[0].world() == 6);
  CHECK_THROWS_AS(parse_topologies("2by2"), UsageError);
  CHECK_THROWS_AS(parse_comm_layout("ring"), UsageError);
  // The links survive the model file.
  const StepModel back = StepModel::from_json(m.to_json(), "test");
  CHECK(back.intra.busbw_Bps == m.intra.busbw_Bps);
  CHECK(back.inter.alpha_s == m.inter.alpha_s);
  CHECK_FALSE(StepModel::from_json(one_level.to_json(), "test").inter.known());
}

namespace {
// Links whose flat and two-level prices cross at 2223 bytes on 2 x 2 (worked in the first case below).
StepModel crossing_model() {
  StepModel m;
  m.compute_s = 0.1;
  m.busbw_Bps = 1e8;
  m.alpha_s = 1e-5;
  m.intra = {1e9, 2e-5};
  m.inter = {1e8, 2e-5};
  return m;
}
}  // namespace

TEST_CASE("hierarchical_from_bytes: where the two levels start to cost less, worked by hand", "[scaling-model]") {
  const StepModel m = crossing_model();
  const Topology t{2, 2};
  // All-reduce, 2 x 2. Flat: 2(3)/4 b / 1e8 + 6 x 1e-5 = 1.5e-8 b + 6e-5. Hierarchical: reduce-scatter
  // and all-gather over 2 on intra (0.5 b / 1e9 + 2e-5 each) + all-reduce of b/2 over 2 on inter
  // (b/2 / 1e8 + 2 x 2e-5) = 6e-9 b + 8e-5. They meet at b = 2e-5 / 9e-9 = 2222.2 bytes.
  const auto from = hierarchical_from_bytes(m, CollectiveOp::kAllReduce, t);
  REQUIRE(from);
  CHECK(*from == 2223);
  auto cost = [&](double b, CommLayout l) { return collective_cost(m, CollectiveOp::kAllReduce, b, t, l).seconds; };
  CHECK(cost(2223, CommLayout::kHierarchical) < cost(2223, CommLayout::kFlat));
  CHECK(cost(2222, CommLayout::kHierarchical) >= cost(2222, CommLayout::kFlat));
  // Cheaper intra latency: hierarchical wins at every size.
  StepModel cheap = m;
  cheap.intra.alpha_s = 2e-6;
  CHECK(hierarchical_from_bytes(cheap, CollectiveOp::kAllReduce, t) == std::optional<std::uint64_t>(0));
  // A flat path faster per byte than the two levels: never.
  StepModel fast_flat = m;
  fast_flat.busbw_Bps = 1e10;
  CHECK_FALSE(hierarchical_from_bytes(fast_flat, CollectiveOp::kAllReduce, t));
  // Nothing to choose: one node, one rank per node, a broadcast.
  CHECK_FALSE(hierarchical_from_bytes(m, CollectiveOp::kAllReduce, {1, 4}));
  CHECK_FALSE(hierarchical_from_bytes(m, CollectiveOp::kAllReduce, {4, 1}));
  CHECK_FALSE(hierarchical_from_bytes(m, CollectiveOp::kBroadcast, t));
  // Without the inter-node link the hierarchical price is unknown: collective_cost's error.
  StepModel one_level = m;
  one_level.inter = {};
  CHECK_THROWS_WITH(hierarchical_from_bytes(one_level, CollectiveOp::kAllReduce, t), Catch::Contains("needs both links"));
}

TEST_CASE("hierarchical_from_bytes: on random models the threshold is where the cheaper layout changes", "[scaling-model]") {
  std::mt19937 gen(35);
  std::uniform_real_distribution<double> decade(0, 1);
  auto log_between = [&](double lo, double hi) { return lo * std::pow(hi / lo, decade(gen)); };
  int crossings = 0;
  for (int i = 0; i < 400; ++i) {
    StepModel m;
    m.compute_s = 0.1;
    m.busbw_Bps = log_between(1e7, 1e10);
    m.alpha_s = log_between(1e-6, 1e-4);
    m.intra = {log_between(1e8, 1e11), log_between(1e-7, 1e-4)};
    m.inter = {log_between(1e6, 1e10), log_between(1e-6, 1e-3)};
    const Topology t{2 + int(gen() % 3), 2 + int(gen() % 3)};
    for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
      auto cost = [&](double b, CommLayout l) { return collective_cost(m, op, b, t, l).seconds; };
      const auto from = hierarchical_from_bytes(m, op, t);
      INFO("model " << m.to_json().dump() << " topology " << t.describe() << " op " << op_name(op));
      if (!from) {  // flat at large sizes: compare far out
        CHECK(cost(1e15, CommLayout::kHierarchical) >= cost(1e15, CommLayout::kFlat) * (1 - 1e-9));
        continue;
      }
      // Just past the threshold and far beyond it hierarchical is cheaper; just before it, not
      // (relative slack 1e-9 for the rounding of the two lines read off 0 and 2^30 bytes).
      const double b = double(*from);
      CHECK(cost(b * 1.01 + 1, CommLayout::kHierarchical) < cost(b * 1.01 + 1, CommLayout::kFlat));
      CHECK(cost(b * 1e6 + 1e9, CommLayout::kHierarchical) < cost(b * 1e6 + 1e9, CommLayout::kFlat));
      if (b > 100) {
        ++crossings;
        CHECK(cost(b * 0.99, CommLayout::kHierarchical) >= cost(b * 0.99, CommLayout::kFlat) * (1 - 1e-9));
      }
    }
  }
  CHECK(crossings > 20);  // the draw covers models whose lines cross at a real size
}

TEST_CASE("ddp-train's --step-model: auto thresholds from a model file, and its refusals", "[scaling-model]") {
  const fs::path dir = fresh_dir("step_model_option");
  const StepModel m = crossing_model();
  const std::string good = (dir / "two_links.json").string(), flat_only = (dir / "one_link.json").string();
  std::ofstream(good) << m.to_json().dump();
  StepModel one_level = m;
  one_level.intra = one_level.inter = {};
  std::ofstream(flat_only) << one_level.to_json().dump();

  ParallelismOptions p;
  p.allreduce = AllReduceAlgorithm::kAuto;
  choose_hierarchy_by_model(p, good);
  REQUIRE(p.hierarchy_model);
  CHECK(p.hierarchy_source == "the step model " + good);
  const auto from = hierarchical_thresholds(*p.hierarchy_model, {2, 2});
  CHECK(from[int(CollectiveOp::kAllReduce)] == *hierarchical_from_bytes(m, CollectiveOp::kAllReduce, {2, 2}));
  CHECK(from[int(CollectiveOp::kReduceScatter)] == *hierarchical_from_bytes(m, CollectiveOp::kReduceScatter, {2, 2}));
  CHECK(from[int(CollectiveOp::kBroadcast)] == kNeverHierarchical);
  for (std::uint64_t b : hierarchical_thresholds(*p.hierarchy_model, {1, 4})) CHECK(b == kNeverHierarchical);  // one node: flat

  ParallelismOptions halving;
  halving.allreduce = AllReduceAlgorithm::kHalvingDoubling;
  CHECK_THROWS_WITH(choose_hierarchy_by_model(halving, good), Catch::Contains("under --allreduce auto"));
  ParallelismOptions q;
  CHECK_THROWS_WITH(choose_hierarchy_by_model(q, flat_only),
                    Catch::Contains(flat_only) && Catch::Contains("no intra-node and inter-node links"));
  CHECK_THROWS_WITH(choose_hierarchy_by_model(q, (dir / "missing.json").string()),
                    Catch::Contains("missing.json") && Catch::Contains("--step-model"));
  CHECK_FALSE(q.hierarchy_model);  // nothing set by a refusal
}

TEST_CASE("predict: the table and JSON show the inputs and every W", "[scaling-model]") {
  const StepModel m = seed_lab_model();
  const std::string table = prediction_table(m, {1, 2, 16});
  CHECK(table.find("busbw 10.000 GB/s") != std::string::npos);
  CHECK(table.find("alpha 30.00 us") != std::string::npos);
  CHECK(table.find("16 x AllReduce of 2097152 bytes") != std::string::npos);
  const nlohmann::json j = prediction_json(m, {1, 2, 16});
  REQUIRE(j["rows"].size() == 3);
  CHECK(j["rows"][2]["workers"] == 16);
  CHECK(j["rows"][2]["speedup"].get<double>() == Approx(predict(m, 16).speedup));
  const StepModel back = StepModel::from_json(m.to_json(), "roundtrip");
  CHECK(predict(back, 8).step_s == predict(m, 8).step_s);
}

TEST_CASE("fit: synthetic measurements with 2% noise recover the parameters", "[scaling-model]") {
  // Known parameters: busbw 12 GB/s, alpha 25 us, compute 120 ms (weak scaling), straggler 0.1,
  // overlap 0.3; the runs' step: 8 all-reduces of 4 MiB. Every measured time (each sweep row, each
  // run's median step) is multiplied by 1 + 0.02 z, z standard normal (seeded). The sweep: 3 ops
  // x W 2/4/8 x 10 sizes 1 KiB..256 MiB; the runs: W 1..64, kRepeats runs each (the straggler
  // coefficient is a slope in log2 W: fewer runs or a narrower W range leave it noisier than 5%).
  StepModel truth;
  truth.compute_s = 0.120;
  truth.scaling = Scaling::kWeak;
  truth.tokens_per_step = 4096;
  truth.collectives = {{CollectiveOp::kAllReduce, 4.0 * 1024 * 1024, 8}};
  truth.busbw_Bps = 12e9;
  truth.alpha_s = 25e-6;
  truth.overlap = 0.3;
  truth.straggler = 0.1;
  const int kSteps = 20, kRepeats = 8;
  double worst[5] = {0, 0, 0, 0, 0};  // busbw, alpha, compute, straggler, prediction
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    Noise noise(seed, 0.02);
    const fs::path dir = fresh_dir("fit_" + std::to_string(seed));
    CollectiveSweep sweep;
    sweep.ranks = 8;
    for (CollectiveOp o : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather})
      for (int w : {2, 4, 8})
        for (std::uint64_t bytes = 1024; bytes <= 256ull * 1024 * 1024; bytes *= 4) {
          const double t = collective_seconds(o, double(bytes), w, truth.busbw_Bps, truth.alpha_s) * noise.factor();
          sweep.rows.push_back({o, "communicator-fast", w, bytes, 10, t, 0, 0, 0});
          sweep.rows.push_back({o, "mpi", w, bytes, 10, 10 * t, 0, 0, 0});  // another impl: ignored
        }
    write_text(dir / "coll.json", sweep.to_json().dump());
    FitOptions fo;
    fo.collectives_path = (dir / "coll.json").string();
    for (int w : {1, 2, 4, 8, 16, 32, 64})
      for (int rep = 0; rep < kRepeats; ++rep) {
        const StepTerms t = predict(truth, w);
        const double step = t.step_s * noise.factor();
        const fs::path run = dir / ("run_w" + std::to_string(w) + "_" + std::to_string(rep));
        fs::create_directories(run);
        RunSummary summary;  // the fields the fit reads; the rest at their defaults
        CommStats& comm = summary.communication.dp;
        comm.group_size = w;
        if (w > 1) {
          comm.per_op[int(CollectiveOp::kAllReduce)] = {8 * kSteps, 8ull * kSteps * 4 * 1024 * 1024, 0, 0};
          comm.per_op[int(CollectiveOp::kBroadcast)] = {1, 1000000, 0, 0};  // start-up: not a step's
        }
        summary.world_size = w;
        summary.median_step_s = step;
        summary.steps = kSteps;
        summary.throughput_tokens_per_s = w * truth.tokens_per_step / step;
        summary.per_rank_medians.columns["comm_total_s"].stats.median = t.comm_s;
        summary.per_rank_medians.columns["comm_exposed_s"].stats.median = t.exposed_comm_s;
        write_text(run / "summary.json", summary.to_json().dump());
        fo.run_dirs.push_back(run.string());
      }
    const StepModel fit = fit_model(fo);
    CHECK(fit.scaling == Scaling::kWeak);
    CHECK(fit.overlap == Approx(0.3));
    CHECK(fit.inputs["collectives"]["impl"] == "communicator-fast");
    REQUIRE(fit.collectives.size() == 1);
    CHECK(fit.collectives[0].calls == Approx(8));
    const double e[4] = {fit.busbw_Bps / truth.busbw_Bps - 1, fit.alpha_s / truth.alpha_s - 1,
                         fit.compute_s / truth.compute_s - 1, fit.straggler / truth.straggler - 1};
    for (int i = 0; i < 4; ++i) {
      INFO("seed " << seed << " parameter " << i << " relative error " << e[i]);
      CHECK(std::fabs(e[i]) < 0.05);
      worst[i] = std::max(worst[i], std::fabs(e[i]));
    }
    for (int w : {1, 2, 4, 8, 16, 32, 64}) {
      const double pe = predict(fit, w).step_s / predict(truth, w).step_s - 1;
      INFO("seed " << seed << " W " << w << " prediction error " << pe);
      CHECK(std::fabs(pe) < 0.02);
      worst[4] = std::max(worst[4], std::fabs(pe));
    }
    fs::remove_all(dir);
  }
  if (std::getenv("SCALING_MODEL_VERBOSE"))
    std::printf("fit proof, worst of 20 seeds: busbw %.2f%%, alpha %.2f%%, compute %.2f%%, straggler %.2f%%, "
                "step prediction %.2f%%\n",
                100 * worst[0], 100 * worst[1], 100 * worst[2], 100 * worst[3], 100 * worst[4]);
}

TEST_CASE("plan: memory by memory.hpp, ranking by throughput, exclusions with reasons", "[scaling-model]") {
  StepModel link;  // no latency: the layouts differ by their traffic alone
  link.busbw_Bps = 10e9;
  link.alpha_s = 0;
  PlanOptions o;
  o.params = 1.3e9;
  o.ranks = 8;
  o.micro_batch = 1;
  o.seq_len = 1024;
  o.vocab = 50257;
  o.model = link;
  o.memory_per_rank = 1e15;  // everything fits
  const ModelConfig cfg = model_for_parameter_count(o.params, o.vocab, o.seq_len);
  CHECK(std::fabs(double(cfg.parameter_count()) / o.params - 1) < 0.05);
  const Plan all = plan_layouts(o);
  // Every TP degree the trainers accept on 8 ranks (dividing 8, n_head and 4 x d_model), counted
  // here from the shape itself, times the four stages.
  std::vector<int> degrees;
  for (int t = 1; t <= 8; ++t)
    if (8 % t == 0 && cfg.n_head % t == 0 && (4 * cfg.d_model) % t == 0) degrees.push_back(t);
  REQUIRE(degrees.size() >= 2);
  CHECK(all.tp_degrees == degrees);
  REQUIRE(all.rows.size() == 4 * degrees.size());
  for (const auto& r : all.rows) {
    INFO(r.layout);
    CHECK(r.dp * r.tp == 8);
    CHECK(r.grad_accum == 8 / r.dp);  // global batch = micro 1 x 8 ranks, spread over the DP ranks
    const MemoryEstimate e = estimate_memory(cfg, r.zero_stage, 8, 1, r.grad_accum, false, r.tp, DeviceKind::kCpu);
    CHECK(r.memory.total() == e.total());
    CHECK(r.fits);
    CHECK((r.tp == 1) == r.tp_collectives.empty());
    CHECK(r.predicted.comm_s == Approx(r.dp_comm_s + r.tp_comm_s));
  }
  const double P = double(cfg.parameter_count());
  const auto row = [](const Plan& p, const std::string& name) -> const PlanRow& {
    for (const auto& r : p.rows)
      if (r.layout == name) return r;
    throw std::runtime_error("no row " + name);
  };
  CHECK(row(all, "DDP").memory.model_state == 16 * P);  // the formula of PERFORMANCE.md
  for (std::size_t i = 1; i < all.rows.size(); ++i)
    CHECK(all.rows[i - 1].predicted.tokens_per_s >= all.rows[i].predicted.tokens_per_s);
  CHECK(row(all, "ZeRO-3").predicted.tokens_per_s < row(all, "ZeRO-2").predicted.tokens_per_s);  // more traffic
  // ZeRO-3 moves DDP's bytes and gathers the blocks once more for backward: (W-1)/W of their 4
  // bytes per parameter (the embeddings and ln_f stay gathered from forward to backward).
  const ParameterRegistry registry(cfg);
  double blocks = 0;
  for (const auto& u : registry.units())
    if (u.name.rfind("h.", 0) == 0) blocks += double(u.size());
  CHECK(row(all, "ZeRO-3").predicted.comm_s ==
        Approx(row(all, "DDP").predicted.comm_s + 7.0 / 8 * 4 * blocks / 10e9).epsilon(1e-4));
  CHECK(row(all, "ZeRO-1").predicted.comm_s == Approx(row(all, "DDP").predicted.comm_s));
  // With latency, the fewer calls win: DDP's 4 MiB buckets (ceil(4P / 4 MiB) all-reduces, 2(W-1)
  // ring steps each) against ZeRO-1's L + 2 reduce-scatters and all-gathers (W-1 steps each).
  o.model.alpha_s = 20e-6;
  const Plan lat = plan_layouts(o);
  // DDP's buckets: the embeddings' gradient (pinned, reduced after backward) apart from the rest.
  const double E = double(registry.units().front().size());
  const double buckets = std::ceil(4 * (P - E) / (4.0 * 1024 * 1024)) + std::ceil(4 * E / (4.0 * 1024 * 1024));
  CHECK(row(lat, "DDP").predicted.comm_s - row(all, "DDP").predicted.comm_s == Approx(buckets * 14 * 20e-6));
  CHECK(row(lat, "ZeRO-1").predicted.comm_s - row(all, "ZeRO-1").predicted.comm_s ==
        Approx(2 * (cfg.n_layer + 2) * 7 * 20e-6));
  const auto first_tp1 = [](const Plan& p) -> const PlanRow& {  // the best row without TP
    for (const auto& r : p.rows)
      if (r.tp == 1) return r;
    throw std::runtime_error("no TP-1 row");
  };
  CHECK(first_tp1(lat).layout == "ZeRO-1");
  o.model.alpha_s = 0;
  CHECK(all.text().find("not built yet") == std::string::npos);
  CHECK(all.text().find("tensor parallelism: TP degrees 1, 2") != std::string::npos);

  // TP 2 by hand, the ring formula with alpha 0: the DP axis (4 ranks) all-reduces one TP rank's
  // share of the gradients, 2(4-1)/4 x 4 P_local / busbw; the TP axis (2 ranks) per micro-batch
  // (one here) 4L+2 all-reduces of 4NC bytes and one of 8N (2(2-1)/2 x bytes / busbw each) and an
  // all-gather of 4N x 2 bytes ((2-1)/2 x bytes / busbw).
  const PlanRow& ddp_tp2 = row(all, "DDP x TP2");
  const double P_local = double(ParameterRegistry(cfg, {2, 0}).total());
  CHECK(P_local < 0.6 * P);  // the split matrices and wte halve; LayerNorms, wpe and biases do not
  CHECK(ddp_tp2.dp == 4);
  CHECK(ddp_tp2.dp_comm_s == Approx(1.5 * 4 * P_local / 10e9));
  const double N = 1.0 * 1024, C = cfg.d_model;
  REQUIRE(ddp_tp2.grad_accum == 2);  // global batch 8 over DP 4, micro-batch 1
  const double tp_s = 2 * ((4.0 * cfg.n_layer + 2) * 4 * N * C + 8 * N + 0.5 * 4 * N * 2) / 10e9;
  CHECK(ddp_tp2.tp_comm_s == Approx(tp_s));
  CHECK(ddp_tp2.memory.model_state == Approx(16 * P_local));
  // The TP sums are on the critical path: exposed whatever the overlap; of the DP share only the
  // pinned embeddings' reduction (after backward) is, the rest hides behind backward.
  o.model.overlap = 1;
  const Plan hidden = plan_layouts(o);
  const double E_tp2 = double(ParameterRegistry(cfg, {2, 0}).units().front().size());
  CHECK(row(hidden, "DDP x TP2").predicted.exposed_comm_s == Approx(ddp_tp2.tp_comm_s + 1.5 * 4 * E_tp2 / 10e9));
  CHECK(row(hidden, "DDP").predicted.exposed_comm_s == Approx(2.0 * 7 / 8 * 4 * E / 10e9));
  o.model.overlap = 0;
  // --device cuda: the trainers refuse --tp > 1 there, so the plan holds TP 1 only and says why.
  o.device = DeviceKind::kCuda;
  const Plan cuda = plan_layouts(o);
  CHECK(cuda.tp_degrees == std::vector<int>{1});
  CHECK(cuda.rows.size() == 4);
  CHECK(cuda.text().find("only TP 1 on --device cuda") != std::string::npos);
  o.device = DeviceKind::kCpu;

  // A budget below every TP-1 layout's need but above the least a TP layout needs: only TP
  // layouts fit, every TP-1 one is excluded saying why.
  double least_tp1 = 1e300, least_tp = 1e300;
  for (const auto& r : all.rows) {
    double& least = r.tp == 1 ? least_tp1 : least_tp;
    least = std::min(least, r.resident);  // the budget holds the process's resident (estimate + overhead)
  }
  REQUIRE(least_tp < least_tp1);
  o.memory_per_rank = (least_tp + least_tp1) / 2;
  const Plan only_tp = plan_layouts(o);
  CHECK(only_tp.rows.front().fits);
  CHECK(only_tp.rows.front().tp > 1);
  for (const auto& r : only_tp.rows)
    if (r.tp == 1) CHECK_FALSE(r.fits);
  o.memory_per_rank = 1e15;

  // A budget between ZeRO-3's need and ZeRO-2's at TP 1: of the TP-1 layouts only ZeRO-3 fits,
  // the others say why.
  const double z3 = row(all, "ZeRO-3").resident, z2 = row(all, "ZeRO-2").resident;
  REQUIRE(z3 < z2);
  o.memory_per_rank = (z3 + z2) / 2;
  const Plan tight = plan_layouts(o);
  CHECK(first_tp1(tight).layout == "ZeRO-3");
  CHECK(first_tp1(tight).fits);
  for (const auto& r : tight.rows) {
    if (r.tp > 1 || r.layout == "ZeRO-3") continue;
    CHECK_FALSE(r.fits);
    char expect[128];
    std::snprintf(expect, sizeof(expect), "needs %.2f GB per rank (the process's resident), budget %.2f GB", r.resident / 1e9,
                  o.memory_per_rank / 1e9);
    CHECK(r.reason == expect);
  }
  for (std::size_t i = 1; i < tight.rows.size(); ++i)  // the fitting ones first
    CHECK((tight.rows[i - 1].fits || !tight.rows[i].fits));
  const nlohmann::json j = tight.to_json();
  CHECK(j["layouts"].size() == tight.rows.size());
  CHECK(j["layouts"][0]["fits"] == true);
  CHECK(j["layouts"][0]["dp"].get<int>() * j["layouts"][0]["tp"].get<int>() == 8);
  CHECK(all.to_json()["tensor_parallelism"]["degrees"] == degrees);
}

TEST_CASE("plan: on a slow link what outlasts its pass is exposed, worked by hand", "[scaling-model]") {
  // GPT-2 small on 2 ranks, global batch 2 (one micro-batch each), 21 s of compute per step (this
  // machine's one-rank step), forward 0.35 and backward 0.62 of it, overlap 0.9, no latency. E:
  // the embeddings unit's parameters, R the rest; h the LM head's share of each pass, 2 V C of the
  // forward's FLOPs per token. At W = 2 an all-reduce moves 4 x its bytes / busbw, a reduce-scatter
  // or all-gather half that. DDP: the rest's buckets stream behind backward, the embeddings'
  // (completed last) after it. ZeRO-1/2: reduce-scatters behind backward and the parameter
  // gathers behind the next forward, the embeddings' pinned in both. ZeRO-3: a gather of
  // everything for forward, of the blocks again for backward, a reduce-scatter of everything.
  PlanOptions o;
  o.shape = model_preset("gpt2-small");
  o.shape_name = "gpt2-small";
  o.ranks = 2;
  o.memory_per_rank = 1e15;
  o.model.compute_s = 21;
  o.model.forward_share = 0.35;
  o.model.backward_share = 0.62;
  o.model.overlap = 0.9;
  const ParameterRegistry registry(*o.shape);
  const double P = double(registry.total()), E = double(registry.units().front().size());
  double blocks = 0;
  for (const auto& u : registry.units())
    if (u.name.rfind("h.", 0) == 0) blocks += double(u.size());
  const double R = P - E;
  const double h = 2.0 * 50257 * 768 / (o.shape->flops_per_token() / 3);
  CHECK(h == Approx(0.269).epsilon(0.01));
  const double fwd = 0.35 * (1 - h) * 21, bwd = 0.62 * (1 - h) * 21;
  const auto exposed_of = [](const Plan& p, const std::string& name) {
    for (const auto& r : p.rows)
      if (r.layout == name) return r.predicted.exposed_comm_s;
    throw std::runtime_error("no row " + name);
  };
  const auto plan_at = [&](double busbw) {
    o.model.busbw_Bps = busbw;
    const Plan plan = plan_layouts(o);
    const double e = 2 * E / busbw, r = 2 * R / busbw, b = 2 * blocks / busbw;  // one gather or scatter
    const double ddp = std::max(0.1 * 2 * (e + r), 2 * e + std::max(0.0, 2 * r - bwd));
    const double zero2 = std::max(0.1 * 2 * (e + r), 2 * e + std::max(0.0, r - fwd) + std::max(0.0, r - bwd));
    const double zero3 = std::max(0.1 * (2 * e + 2 * r + b), 2 * e + std::max(0.0, r - fwd) + std::max(0.0, r + b - bwd));
    CHECK(exposed_of(plan, "DDP") == Approx(ddp).epsilon(1e-6));
    CHECK(exposed_of(plan, "ZeRO-1") == Approx(zero2).epsilon(1e-6));
    CHECK(exposed_of(plan, "ZeRO-2") == Approx(zero2).epsilon(1e-6));
    CHECK(exposed_of(plan, "ZeRO-3") == Approx(zero3).epsilon(1e-6));
    return plan;
  };
  // 12.5 MB/s (a 200 Mbit/s link carrying both ways at once): every pass is outlasted.
  const Plan slow = plan_at(12.5e6);
  CHECK(exposed_of(slow, "ZeRO-2") < exposed_of(slow, "DDP"));
  CHECK(exposed_of(slow, "DDP") < exposed_of(slow, "ZeRO-3"));
  // 1 GB/s: only the pinned embeddings show (more than the overlap's floor), twice over ZeRO's
  // passes (its gather and its reduce-scatter) against DDP's one all-reduce of the same bytes.
  const Plan fast = plan_at(1e9);
  CHECK(exposed_of(fast, "DDP") == Approx(4 * E / 1e9).epsilon(1e-6));
  CHECK(exposed_of(fast, "ZeRO-3") == Approx(exposed_of(fast, "ZeRO-2")).epsilon(1e-9));
}

TEST_CASE("step model file: phases and pass shares written and read back, older files and bad phases refused or defaulted", "[scaling-model]") {
  StepModel m;
  m.compute_s = 2;
  m.busbw_Bps = 1e9;
  m.forward_share = 0.25;
  m.backward_share = 0.7;
  m.head_share = 0.25;
  m.collectives = {{CollectiveOp::kReduceScatter, 1e6, 14},
                   {CollectiveOp::kAllGather, 1e6, 14, CommPhase::kForward, true}};
  const nlohmann::json j = m.to_json();
  CHECK(j["collectives"][1]["phase"] == "forward");
  CHECK(j["collectives"][0]["phase"] == "backward");
  const StepModel back = StepModel::from_json(j, "roundtrip");
  CHECK(back.forward_share == 0.25);
  CHECK(back.backward_share == 0.7);
  REQUIRE(back.collectives.size() == 2);
  CHECK(back.collectives[1].phase == CommPhase::kForward);
  CHECK(back.collectives[1].pinned);
  CHECK_FALSE(back.collectives[0].pinned);
  CHECK(back.head_share == 0.25);
  CHECK(predict(back, 4).step_s == predict(m, 4).step_s);
  // A file written before the phases: no shares, no phase: the FLOP split, everything behind backward.
  nlohmann::json old = j;
  old.erase("forward_share");
  old.erase("backward_share");
  old.erase("head_share");
  for (auto& c : old["collectives"]) c.erase("phase"), c.erase("pinned");
  const StepModel older = StepModel::from_json(old, "older");
  CHECK(older.forward_share == Approx(1.0 / 3));
  CHECK(older.backward_share == Approx(2.0 / 3));
  CHECK(older.collectives[1].phase == CommPhase::kBackward);
  CHECK_FALSE(older.collectives[1].pinned);
  CHECK(older.head_share == 0);
  nlohmann::json bad = j;
  bad["collectives"][0]["phase"] = "sideways";
  CHECK_THROWS_WITH(StepModel::from_json(bad, "bad.json"), Catch::Contains("model 'bad.json'") && Catch::Contains("'phase'"));
  bad = j;
  bad["collectives"][1]["pinned"] = "yes";
  CHECK_THROWS_WITH(StepModel::from_json(bad, "bad.json"), Catch::Contains("'pinned'"));
  StepModel over = m;
  over.backward_share = 0.8;  // 0.25 + 0.8 > 1
  CHECK_THROWS_WITH(over.validate(), Catch::Contains("backward_share"));
}

TEST_CASE("fit: each operation gets its own link where the sweep measured it apart", "[scaling-model]") {
  // A sweep whose all-reduce runs at 10 GB/s and 20 us per ring step, its reduce-scatter and
  // all-gather at 25 GB/s and 5 us (exact times: the fit must recover each pair), W = 2 and 4.
  const fs::path dir = fresh_dir("per_op");
  CollectiveSweep sweep;
  sweep.ranks = 4;
  for (CollectiveOp o : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather})
    for (int w : {2, 4})
      for (std::uint64_t bytes = 1 << 20; bytes <= (64u << 20); bytes *= 4) {
        const bool ar = o == CollectiveOp::kAllReduce;
        const double t = collective_seconds(o, double(bytes), w, ar ? 10e9 : 25e9, ar ? 20e-6 : 5e-6);
        sweep.rows.push_back({o, "communicator-fast", w, bytes, 10, t, 0, 0, 0});
      }
  write_text(dir / "coll.json", sweep.to_json().dump());
  FitOptions fo;
  fo.collectives_path = (dir / "coll.json").string();
  StepModel m = fit_model(fo);
  REQUIRE(m.op_links.size() == 3);
  CHECK(m.link_for(CollectiveOp::kAllReduce).busbw_Bps == Approx(10e9));
  CHECK(m.link_for(CollectiveOp::kAllReduce).alpha_s == Approx(20e-6));
  CHECK(m.link_for(CollectiveOp::kAllReduceCanonical).busbw_Bps == Approx(10e9));
  CHECK(m.link_for(CollectiveOp::kReduceScatter).busbw_Bps == Approx(25e9));
  CHECK(m.link_for(CollectiveOp::kAllGather).alpha_s == Approx(5e-6));
  CHECK(m.link_for(CollectiveOp::kBroadcast).busbw_Bps == m.busbw_Bps);  // none measured: the common link
  // A step of one all-reduce and one reduce-scatter of 8 MB at W = 4 is priced on each one's link.
  m.compute_s = 1;
  m.collectives = {{CollectiveOp::kAllReduce, 8e6, 1}, {CollectiveOp::kReduceScatter, 8e6, 1}};
  CHECK(predict(m, 4).comm_s == Approx(1.5 * 8e6 / 10e9 + 6 * 20e-6 + 0.75 * 8e6 / 25e9 + 3 * 5e-6));
  const StepModel back = StepModel::from_json(m.to_json(), "roundtrip");
  CHECK(back.op_links.size() == 3);
  CHECK(predict(back, 4).comm_s == predict(m, 4).comm_s);
  nlohmann::json bad = m.to_json();
  bad["per_op"]["Barrier"] = {{"busbw_Bps", 1e9}, {"alpha_s", 0}};
  CHECK_THROWS_WITH(StepModel::from_json(bad, "bad.json"), Catch::Contains("per_op 'Barrier'"));
}

TEST_CASE("fit: pass shares from the runs' step logs, ZeRO's gathers put behind forward", "[scaling-model]") {
  RunSummary summary;
  summary.world_size = 2;
  summary.median_step_s = 10;
  summary.steps = 4;
  summary.throughput_tokens_per_s = 2048 / 10.0;
  summary.per_rank_medians.columns["comm_exposed_s"].stats.median = 1;
  summary.per_rank_medians.columns["fwd_s"].stats.median = 3;
  summary.per_rank_medians.columns["bwd_s"].stats.median = 5.4;
  summary.communication.dp.group_size = 2;
  summary.communication.dp.per_op[int(CollectiveOp::kAllGather)] = {4 * 28, 4 * 28 * 1000, 0, 0};
  summary.communication.dp.per_op[int(CollectiveOp::kReduceScatter)] = {4 * 14, 4 * 14 * 1000, 0, 0};
  summary.memory_bytes_rank0.zero_stage = 3;  // the summary's own record of the stage
  RunSample r = run_sample_of(summary, "z3");
  // Compute is the step less its exposed communication, 9 s: forward 3/9, backward 5.4/9.
  const auto shares = measured_pass_shares({r});
  REQUIRE(shares);
  CHECK(shares->first == Approx(3.0 / 9));
  CHECK(shares->second == Approx(5.4 / 9));
  // ZeRO-3's 28 gathers per step: 14 for forward, 14 again for backward.
  double forward_calls = 0, backward_gathers = 0;
  for (const auto& c : r.collectives) {
    if (c.phase == CommPhase::kForward) forward_calls += c.calls;
    else if (c.op == CollectiveOp::kAllGather) backward_gathers += c.calls;
  }
  CHECK(forward_calls == 14);
  CHECK(backward_gathers == 14);
  summary.memory_bytes_rank0.zero_stage = 2;
  r = run_sample_of(summary, "z2");
  for (const auto& c : r.collectives)
    CHECK((c.phase == CommPhase::kForward) == (c.op == CollectiveOp::kAllGather));
  // A run that logs no passes leaves the FLOP split.
  summary.per_rank_medians.columns.erase("fwd_s");
  CHECK_FALSE(measured_pass_shares({run_sample_of(summary, "plain")}));
}

TEST_CASE("bad input: workers, files, budgets are usage errors naming the thing", "[scaling-model]") {
  CHECK(parse_workers("1,2,4") == std::vector<int>{1, 2, 4});
  CHECK_THROWS_WITH(parse_workers("0"), Catch::Contains("--workers") && Catch::Contains("not in [1"));
  CHECK_THROWS_WITH(parse_workers("two"), Catch::Contains("'two' is not a whole number"));
  CHECK_THROWS_WITH(parse_workers("1,,2"), Catch::Contains("is not a whole number"));
  CHECK_THROWS_WITH(parse_workers(""), Catch::Contains("--workers is empty"));
  CHECK_THROWS_AS(parse_workers("4x"), UsageError);
  CHECK_THROWS_WITH(parse_bytes("-8GB", "--memory-per-rank"), Catch::Contains("--memory-per-rank") && Catch::Contains("positive"));
  CHECK(parse_bytes("8GB", "x") == 8e9);
  CHECK(parse_bytes("1GiB", "x") == 1073741824.0);
  CHECK_THROWS_WITH(parse_bytes("8 parsecs", "--memory-per-rank"), Catch::Contains("unknown unit"));

  const fs::path dir = fresh_dir("bad");
  CHECK_THROWS_WITH(read_collectives((dir / "missing.json").string(), ""), Catch::Contains("missing.json") && Catch::Contains("cannot open"));
  write_text(dir / "broken.json", "{\"format\": \"shardtrain-collectives\", \"rows\": [");
  CHECK_THROWS_WITH(read_collectives((dir / "broken.json").string(), ""), Catch::Contains("broken.json") && Catch::Contains("not valid JSON"));
  write_text(dir / "other.json", "{\"format\": \"something\"}");
  CHECK_THROWS_WITH(read_collectives((dir / "other.json").string(), ""), Catch::Contains("not a collectives sweep"));
  write_text(dir / "notime.json", R"({"format":"shardtrain-collectives","rows":[{"op":"AllReduce","impl":"mpi","ranks":2,"bytes":8}]})");
  CHECK_THROWS_WITH(read_collectives((dir / "notime.json").string(), ""),
                    Catch::Contains("notime.json") && Catch::Contains("no field /format_version"));
  write_text(dir / "notime.json", R"({"format":"shardtrain-collectives","format_version":1,"ranks":2,"rows":[{"op":"AllReduce","impl":"mpi","ranks":2,"bytes":8,"iterations":2}]})");
  CHECK_THROWS_WITH(read_collectives((dir / "notime.json").string(), ""),
                    Catch::Contains("notime.json") && Catch::Contains("no field /rows/0/time_s"));
  write_text(dir / "badop.json", R"({"format":"shardtrain-collectives","format_version":1,"ranks":2,"rows":[{"op":"AllToAll","impl":"mpi","ranks":2,"bytes":8,"iterations":2,"time_s":1e-5,"algbw_GBps":0,"busbw_GBps":0,"wrong":0}]})");
  CHECK_THROWS_WITH(read_collectives((dir / "badop.json").string(), ""),
                    Catch::Contains("/rows/0/op") && Catch::Contains("'AllToAll' is not a collective"));
  CHECK_THROWS_WITH(StepModel::from_json(nlohmann::json{{"format", "shardtrain-scaling-model"}}, "m.json"),
                    Catch::Contains("m.json") && Catch::Contains("compute_s"));
  CHECK_THROWS_WITH(read_run((dir / "norun").string()), Catch::Contains("norun/summary.json"));

  PlanOptions p;
  p.params = 1e8;
  p.ranks = 2;
  p.memory_per_rank = -8e9;
  p.model.busbw_Bps = 1e9;
  CHECK_THROWS_WITH(plan_layouts(p), Catch::Contains("--memory-per-rank must be > 0"));

  // Through the subcommands: exit 2 for each bad input, 3 for a file that cannot be read (as the man
  // page says; the one JSON-file reader, base/json_file.hpp), 0 for good input.
  const std::string model = (dir / "model.json").string();
  write_text(dir / "model.json", seed_lab_model().to_json().dump());
  CHECK(run_scale_bench({"predict", "--step-model", model, "--workers", "1,2"}) == 0);
  CHECK(run_scale_bench({"predict", "--step-model", model, "--workers", "0"}) == 2);
  CHECK(run_scale_bench({"predict", "--step-model", model, "--workers", "x"}) == 2);
  CHECK(run_scale_bench({"predict", "--step-model", (dir / "missing.json").string()}) == 3);
  CHECK(run_scale_bench({"predict", "--step-model", (dir / "broken.json").string()}) == 2);
  CHECK(run_scale_bench({"predict", "--busbw-GBps", "450", "--alpha-us", "5"}) == 2);  // no compute
  CHECK(run_scale_bench({"predict", "--busbw-GBps", "450", "--alpha-us", "5", "--compute-ms", "120",
                         "--grad-bytes", "1e9", "--buckets", "25"}) == 0);
  CHECK(run_scale_bench({"fit", "--collectives", (dir / "missing.json").string(), "-o", (dir / "o.json").string()}) == 3);
  CHECK(run_scale_bench({"fit", "--collectives", (dir / "other.json").string(), "--overlap=-0.5", "-o",
                         (dir / "o.json").string()}) == 2);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "0", "--memory-per-rank", "80GB", "--step-model", model}) == 2);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "-8GB", "--step-model", model}) == 2);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", model}) == 0);
  // --device takes the names of backend.hpp's kDeviceKindNames, as the trainers' --device does.
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", model,
                         "--device", "cuda"}) == 0);
  CHECK(run_scale_bench({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", model,
                         "--device", "gpu"}) == 2);
  fs::remove_all(dir);
}

namespace {

// GPT-2 small as published (the Hugging Face gpt2 config: n_layer 12, n_embd 768, n_head 12,
// n_positions 1024, vocab_size 50257, the LM head tied): 124,439,808 parameters, and its training
// FLOPs per token by 6N + 12 L T C (docs/ARCHITECTURE.md), worked here from those numbers.
constexpr double kGpt2SmallParams = 124439808;
constexpr double kGpt2SmallFlopsPerToken = 6 * kGpt2SmallParams + 12.0 * 12 * 1024 * 768;

// scale-bench run as a process (its stdout, its one error line and exit code are the interface).
test::ToolRun scale_bench_process(const std::vector<std::string>& args) { return test::run_built_tool("scale-bench", args); }

std::size_t lines_of(const std::string& text) { return std::size_t(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("plan --model NAME: the named shape exactly, --vocab and --seq-len beside it override it", "[scaling-model]") {
  const auto plan = [](std::vector<std::string> args) {
    args.insert(args.begin(), "plan");
    for (const char* a : {"--ranks", "2", "--memory-per-rank", "80GB", "--busbw-GBps", "10", "--alpha-us", "5"}) args.push_back(a);
    return scale_bench_process(args);
  };
  test::ToolRun r = plan({"--model", "gpt2-small", "--json"});
  REQUIRE(r.status == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["model_name"] == "gpt2-small");
  CHECK(j["model"] == nlohmann::json{{"vocab", 50257}, {"seq_len", 1024}, {"d_model", 768}, {"n_layer", 12}, {"n_head", 12}});
  CHECK(j["model_parameters"].get<double>() == kGpt2SmallParams);
  CHECK(j["params"].get<double>() == kGpt2SmallParams);
  // The parameter registry (the trainers' tensors) of the shape planned counts the same.
  CHECK(double(ParameterRegistry(ModelConfig::from_json(j["model"])).total()) == kGpt2SmallParams);
  // Each of the 2 ranks computes its sequence of 1,024 tokens at the default 100 GFLOP/s.
  CHECK(j["compute_s"].get<double>() == Approx(kGpt2SmallFlopsPerToken * 1024 / 100e9).epsilon(1e-12));
  // --params could only approximate it: the shape it assumes for the same count is another one.
  CHECK(model_for_parameter_count(kGpt2SmallParams, 50257, 1024) != ModelConfig::from_json(j["model"]));
  // The table says which shape it planned.
  r = plan({"--model", "gpt2-small"});
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("plan: gpt2-small (n_layer 12, d_model 768, n_head 12, vocab 50257, seq_len 1024: "
                                    "124439808 parameters)"));
  // GPT-2 XL: 48 layers of 1600, 25 heads: 1,557,611,200 parameters (the published 1.5B).
  r = plan({"--model", "gpt2-xl", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["model_parameters"].get<double>() == 1557611200.0);
  // --vocab and --seq-len given beside --model override its fields, as on the trainers.
  r = plan({"--seq-len", "256", "--model", "gpt2-small", "--vocab", "50304", "--json"});
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["model"] ==
        nlohmann::json{{"vocab", 50304}, {"seq_len", 256}, {"d_model", 768}, {"n_layer", 12}, {"n_head", 12}});
  // Exactly one of --model and --params; an unknown name lists the names.
  r = plan({"--model", "gpt2-small", "--params", "1e9"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--model NAME or --params N, not both"));
  r = plan({});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("plan needs the model: --model NAME") && Catch::Contains("or --params N"));
  r = plan({"--model", "gpt3"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--model: 'gpt3' is not a known model") &&
                        Catch::Contains("gpt2-small, gpt2-medium, gpt2-large, gpt2-xl") && Catch::Contains("--params N"));
  CHECK(lines_of(r.err) == 1);
  // --params alone as before.
  CHECK(plan({"--params", "1e9"}).status == 0);
}

TEST_CASE("predict --model NAME: one DDP step of the shape wherever the command line gives no workload", "[scaling-model]") {
  const auto predict = [](std::vector<std::string> args) {
    args.insert(args.begin(), "predict");
    for (const char* a : {"--busbw-GBps", "10", "--alpha-us", "5", "--workers", "1,2"}) args.push_back(a);
    return scale_bench_process(args);
  };
  const auto model_of = [](const test::ToolRun& r) { return nlohmann::json::parse(r.out)["model"]; };
  test::ToolRun r = predict({"--model", "gpt2-small", "--json"});
  REQUIRE(r.status == 0);
  nlohmann::json m = model_of(r);
  // The gradients: 4 bytes per parameter, all-reduced once per step as DDP does.
  REQUIRE(m["collectives"].size() == 1);
  CHECK(m["collectives"][0]["op"] == "AllReduce");
  CHECK(m["collectives"][0]["calls"].get<double>() == 1);
  CHECK(m["collectives"][0]["bytes"].get<double>() == 4 * kGpt2SmallParams);
  // One sequence of GPT-2's context, and its FLOPs at the default 100 GFLOP/s.
  CHECK(m["tokens_per_step"].get<double>() == 1024);
  CHECK(m["compute_s"].get<double>() == Approx(kGpt2SmallFlopsPerToken * 1024 / 100e9).epsilon(1e-12));
  CHECK(m["inputs"]["workload"]["model"] == "gpt2-small");
  // W = 2 prices that all-reduce by the ring: 2(W-1)/W x bytes / busbw + 2(W-1) x alpha.
  const nlohmann::json row2 = nlohmann::json::parse(r.out)["rows"][1];
  CHECK(row2["comm_s"].get<double>() == Approx(4 * kGpt2SmallParams / 10e9 + 2 * 5e-6).epsilon(1e-12));
  // --buckets splits the same bytes; --micro-batch and --peak-gflops size the tokens and compute.
  r = predict({"--model", "gpt2-small", "--buckets", "4", "--micro-batch", "4", "--peak-gflops", "1000", "--json"});
  REQUIRE(r.status == 0);
  m = model_of(r);
  CHECK(m["collectives"][0]["calls"].get<double>() == 4);
  CHECK(m["collectives"][0]["bytes"].get<double>() == kGpt2SmallParams);
  CHECK(m["tokens_per_step"].get<double>() == 4096);
  CHECK(m["compute_s"].get<double>() == Approx(kGpt2SmallFlopsPerToken * 4096 / 1000e9).epsilon(1e-12));
  // Explicit options override the shape's workload.
  r = predict({"--model", "gpt2-small", "--grad-bytes", "1e6", "--tokens-per-step", "10", "--compute-ms", "120", "--json"});
  REQUIRE(r.status == 0);
  m = model_of(r);
  CHECK(m["collectives"][0]["bytes"].get<double>() == 1e6);
  CHECK(m["tokens_per_step"].get<double>() == 10);
  CHECK(m["compute_s"].get<double>() == Approx(0.12));
  // The table says what --model set.
  r = predict({"--model", "gpt2-medium"});
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("workload of one step at W=1, --model gpt2-medium") && Catch::Contains("354823168 parameters") &&
                        Catch::Contains("gradients 4 x parameters = 1419292672 bytes"));
  // Refusals: the shape's sizing options without a shape, a rate that prices nothing, a bad batch.
  r = predict({"--micro-batch", "2", "--compute-ms", "1"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("add --model NAME"));
  CHECK(predict({"--model", "gpt2-small", "--compute-ms", "1", "--peak-gflops", "5"}).status == 2);
  CHECK(predict({"--model", "gpt2-small", "--micro-batch", "0"}).status == 2);
  CHECK(predict({"--model", "gpt2-tiny"}).status == 2);
}

TEST_CASE("scale-bench --step-model FILE is the step model file, --model FILE, the old form, is refused in one line", "[scaling-model]") {
  const std::string dir = test::temp_dir("step_model_rename");
  const std::string file = dir + "/model.json";
  write_text(file, seed_lab_model().to_json().dump());
  CHECK(scale_bench_process({"predict", "--step-model", file, "--workers", "1,2"}).status == 0);
  CHECK(scale_bench_process({"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--step-model", file}).status == 0);
  // Scripts written before the rename: each subcommand that took the file says what to write now.
  const std::vector<std::vector<std::string>> old_forms = {
      {"predict", "--model", file, "--workers", "1,2"},
      {"plan", "--params", "1e9", "--ranks", "8", "--memory-per-rank", "80GB", "--model", file},
      {"report", "--model", file, "--out", dir + "/report", dir},
      {"run", "--workers", "1", "--out", dir + "/run", "--model", file, "--", "--steps", "1"}};
  for (const auto& args : old_forms) {
    INFO(args[0]);
    const test::ToolRun r = scale_bench_process(args);
    CHECK(r.status == 2);
    CHECK(lines_of(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains("scale-bench " + args[0] + ": --model names a model shape now") &&
                          Catch::Contains("--step-model " + file));
    CHECK(r.out.empty());
  }
  CHECK_FALSE(fs::exists(dir + "/report"));
  CHECK_FALSE(fs::exists(dir + "/run"));
  // run and report take no shape of their own: the trainer does (after --), a report reads it.
  test::ToolRun r = scale_bench_process({"run", "--workers", "1", "--out", dir + "/run", "--model", "gpt2-small", "--", "--steps", "1"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("give it after --"));
  r = scale_bench_process({"report", "--model", "gpt2-small", dir});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("--step-model FILE"));
  // A path that does not exist is no file to point at: the unknown-name error, listing the names.
  r = scale_bench_process({"predict", "--model", dir + "/missing.json"});
  CHECK(r.status == 2);
  CHECK_THAT(r.err, Catch::Contains("is not a known model") && Catch::Contains("gpt2-small"));
}

TEST_CASE("plan: the assumed shape has a head count tensor parallelism can split", "[scaling-model]") {
  // The nearest width alone gave prime head counts (33 at 1.3e9, 37 at 2.7e9): no TP above 1.
  // Over a sweep of GPT-2-vocabulary sizes from 1e8 parameters (where several widths fall within
  // 5%), every shape stays within 5% of the asked count and its head count divides by 4.
  for (double params = 1e8; params <= 2e11; params *= 1.7) {
    const ModelConfig c = model_for_parameter_count(params, 50257, 1024);
    INFO("params " << params << ": n_layer " << c.n_layer << ", d_model " << c.d_model << ", n_head " << c.n_head);
    CHECK(std::fabs(double(c.parameter_count()) / params - 1) < 0.05);
    CHECK(c.n_head % 4 == 0);
  }
}
