// scale-bench fit (scaling/fit.hpp): the step model's parameters recovered from measurements.
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
#include "scaling_test_support.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

using namespace shardtrain;
using namespace shardtrain::scaling;
using namespace scaling_test;

namespace {

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

}  // namespace

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
    write_text(dir / "coll.json", json_fields::write(sweep).dump());
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
        write_text(run / "summary.json", json_fields::write(summary).dump());
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
  write_text(dir / "coll.json", json_fields::write(sweep).dump());
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
  CHECK_THROWS_WITH(StepModel::from_json(bad, "bad.json"), Catch::Contains("bad.json: the step model field /per_op/Barrier: 'Barrier' is not a modelled operation"));
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
