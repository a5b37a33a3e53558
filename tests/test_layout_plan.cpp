// The layout planner (parallel/layout_plan.hpp) and everything that asks it: the trainers' set-up,
// scale-bench plan, ckpt-reshard's target check and the ZeRO strategy's sharded state kinds.
// The table test: every (device, TP, ZeRO stage, W, memory budget) gets one answer from the
// planner and from the trainers (plan_training_layout for every W; run_training itself at the W
// of this process), accepted or refused for the same reason.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <cstdio>

#include <optional>
#include <string>
#include <vector>

#include "shardtrain/backend/capabilities.hpp"
#include "shardtrain/data/selection.hpp"
#include "shardtrain/data/synthetic.hpp"
#include "shardtrain/parallel/layout_plan.hpp"
#include "shardtrain/scaling/plan.hpp"
#include "shardtrain/train/trainer.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

const std::string& corpus_path() {
  static const std::string path = [] {
    const std::string p = test::temp_dir("layout_corpus") + "/markov.h5";
    data::write_markov_dataset(p, data::MarkovOptions{});
    return p;
  }();
  return path;
}

TrainOptions tiny_job(const std::string& run_dir) {
  TrainOptions o;
  o.data.path = corpus_path();
  o.data.cutoff = "2024-01-17T00:00:00Z";
  o.model = ModelConfig{0, 32, 48, 2, 2};  // 2 heads: TP 2 splits them, TP 3 and 4 do not
  o.schedule.global_batch = 24;            // divisible by micro 2 x every W of the table
  o.schedule.micro_batch = 2;
  o.schedule.steps = 1;
  o.optimizer.max_lr = 3e-3;
  o.optimizer.warmup_steps = 2;
  o.optimizer.decay_steps = 6;
  o.run_dir = run_dir;
  o.telemetry.log_every = 1000;
  o.evaluation.samples = 4;
  o.telemetry.peak_flop_per_s = 1e11;
  return o;
}

// The combination as the planner's request, written here from the combination itself (not from
// the trainers' options), so that a trainer reading an option differently would disagree.
LayoutRequest request_of(const ModelConfig& model, DeviceKind device, int tp, int stage, int world, double budget) {
  LayoutRequest r;
  r.model = model;
  r.world = world;
  r.tp = tp;
  r.zero_stage = stage;
  r.capabilities = backend_capabilities(device);
  r.micro_batch = 2;
  r.global_batch = 24;
  r.memory_budget = budget;
  return r;
}

std::string answer(const LayoutDecision& d) {
  return d.accepted() ? "accepted " + d.plan->describe() : std::string("refused: ") + layout_refusal_name(*d.refusal);
}

// The trainers' answer at this process's W: accepted (set-up got past the layout; it may still fail
// later for another reason, e.g. no GPU for --device cuda) or the refusal set-up threw.
std::optional<LayoutRefusal> trainer_refusal(const TrainOptions& o, std::string& message) {
  try {
    run_training(o);
  } catch (const LayoutRefused& e) {
    message = e.what();
    return e.reason();
  } catch (const std::exception&) {
    // Not a layout refusal: past the planner (on a machine without a GPU, cuda fails here).
  }
  return std::nullopt;
}

constexpr DeviceKind kDevices[] = {DeviceKind::kCpu, DeviceKind::kCuda};
constexpr double kBudgets[] = {0, 1, 1e12};  // none, one byte (nothing fits), plenty

}  // namespace

TEST_CASE("layout planner: every (device, TP, ZeRO stage, W, budget) gets the trainers' answer", "[layout]") {
  test::ensure_mpi();
  const TrainOptions base = tiny_job(test::temp_dir("layout_table"));
  const auto data = data::TrainingData::open(base.data.path, data::SelectionOptions{base.data.cutoff, base.data.eval_from, base.model.seq_len});
  ModelConfig model = base.model;
  model.vocab = int(data.vocab());
  int process_world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &process_world);
  int accepted = 0, refused = 0, run = 0;
  for (DeviceKind device : kDevices)
    for (int tp : {1, 2, 3})
      for (int stage : {0, 1, 2, 3, 4})
        for (int world : {1, 2, 3, 4})
          for (double budget : kBudgets) {
            const LayoutDecision planner = plan_layout(request_of(model, device, tp, stage, world, budget));
            TrainOptions o = base;
            o.parallelism.device = device;
            o.parallelism.tp = tp;
            o.parallelism.zero_stage = stage;
            o.parallelism.memory_budget = budget;
            const LayoutDecision trainer = plan_training_layout(o, model, world);
            INFO("device " << int(device) << " tp " << tp << " stage " << stage << " W " << world << " budget "
                           << budget << ": planner " << answer(planner) << ", trainer " << answer(trainer));
            REQUIRE(planner.accepted() == trainer.accepted());
            CHECK((planner.refusal == trainer.refusal));
            CHECK(planner.message == trainer.message);
            (planner.accepted() ? accepted : refused)++;
            if (world != process_world) continue;
            // run_training itself: refused before any step exactly when the planner refuses. Accepted
            // CPU layouts train their one step (DDP x TP over 1 rank is not a mesh: only TP 1 here).
            o.run_dir = test::temp_dir("layout_run");
            std::string message;
            const std::optional<LayoutRefusal> got = trainer_refusal(o, message);
            ++run;
            CHECK((got == planner.refusal));
            if (got) CHECK(message == planner.message);
          }
  // The table exercises both answers and every reason but the empty world.
  CHECK(accepted > 0);
  CHECK(refused > 0);
  CHECK(run > 0);
}

TEST_CASE("layout planner: the reasons, their order and their messages", "[layout]") {
  const ModelConfig model{65, 32, 48, 2, 2};
  auto reason = [&](LayoutRequest r) {
    const LayoutDecision d = plan_layout(r);
    return d.refusal;
  };
  using R = LayoutRefusal;
  const DeviceKind cpu = DeviceKind::kCpu, cuda = DeviceKind::kCuda;
  CHECK(reason(request_of(model, cpu, 1, 0, 0, 0)) == R::kWorld);
  CHECK(reason(request_of(model, cpu, 1, 5, 1, 0)) == R::kZeroStage);
  CHECK(reason(request_of(model, cuda, 2, 0, 2, 0)) == R::kTensorParallelDevice);
  CHECK(reason(request_of(model, cpu, 4, 0, 4, 0)) == R::kTensorParallelShape);  // 2 heads
  CHECK(reason(request_of(model, cpu, 0, 0, 4, 0)) == R::kTensorParallelShape);
  CHECK(reason(request_of(model, cpu, 2, 0, 3, 0)) == R::kTensorParallelWorld);
  CHECK(reason(request_of(model, cuda, 1, 1, 2, 0)) == R::kZeroDevice);
  CHECK(reason(request_of(model, cpu, 1, 3, 2, 1)) == R::kMemoryBudget);
  CHECK_FALSE(reason(request_of(model, cpu, 2, 3, 4, 1e12)));
  CHECK_FALSE(reason(request_of(model, cuda, 1, 0, 4, 1e12)));

  LayoutRequest bf16 = request_of(model, cpu, 1, 0, 1, 0);
  bf16.precision = Precision::kBf16;
  const LayoutDecision no_bf16 = plan_layout(bf16);
  CHECK(no_bf16.refusal == R::kPrecision);
  CHECK_THAT(no_bf16.message, Catch::Contains("--precision bf16") && Catch::Contains("--device cuda"));
  bf16.capabilities = backend_capabilities(cuda);
  CHECK(plan_layout(bf16).plan->precision == Precision::kBf16);
  CHECK(plan_layout(request_of(model, cuda, 1, 0, 1, 0)).plan->precision == Precision::kBf16);  // cuda's default
  CHECK(plan_layout(request_of(model, cpu, 1, 0, 1, 0)).plan->precision == Precision::kFp32);

  CHECK_THAT(plan_layout(request_of(model, cpu, 3, 0, 3, 0)).message, Catch::Contains("does not divide the model's 2 attention heads"));
  CHECK_THAT(plan_layout(request_of(model, cpu, 2, 0, 3, 0)).message, Catch::Contains("does not divide the world of 3 ranks"));
  CHECK_THAT(plan_layout(request_of(model, cuda, 2, 0, 2, 0)).message,
             Catch::Contains("--tp 2") && Catch::Contains("no vocabulary-slice kernels"));
  CHECK_THAT(plan_layout(request_of(model, cuda, 1, 2, 2, 0)).message, Catch::Contains("host-addressable"));
  CHECK_THROWS_AS(plan_layout(request_of(model, cuda, 1, 2, 2, 0)).value(), LayoutRefused);
  CHECK_THROWS_AS(plan_layout(request_of(model, cuda, 1, 2, 2, 0)).value(), UsageError);  // exit 2
}

TEST_CASE("layout planner: a micro-batch or global batch below 1 is the caller's usage error, never a division by zero",
          "[layout]") {
  // Found by the trainer_cli fuzz target: `ddp-train --micro-batch 0` died of SIGFPE in the planner
  // (its grad_accum divides by micro_batch x DP); the trainers now refuse it first (job.cpp), and
  // the planner states it as a precondition for every caller.
  const ModelConfig model{65, 32, 48, 2, 2};
  LayoutRequest r = request_of(model, DeviceKind::kCpu, 1, 0, 2, 0);
  r.micro_batch = 0;
  CHECK_THROWS_AS(plan_layout(r), UsageError);
  CHECK_THROWS_WITH(plan_layout(r), "--micro-batch must be at least 1 (got 0)");
  r.micro_batch = 2;
  r.global_batch = 0;
  CHECK_THROWS_WITH(plan_layout(r), "--global-batch must be at least 1 (got 0)");
  r.global_batch = -3;
  CHECK_THROWS_WITH(plan_layout(r), "--global-batch must be at least 1 (got -3)");
}

TEST_CASE("layout planner: a memory refusal names the bytes and a layout the same backend runs", "[layout]") {
  const ModelConfig model{1024, 32, 512, 4, 8};  // 13 M parameters: model state, not padding, dominates
  // A budget that ZeRO-3 at W = 4 meets and DDP at W = 1 does not.
  const double z3 = plan_layout(request_of(model, DeviceKind::kCpu, 1, 3, 4, 0)).plan->memory.total();
  const double ddp = plan_layout(request_of(model, DeviceKind::kCpu, 1, 0, 1, 0)).plan->memory.total();
  REQUIRE(z3 < ddp);
  // A budget is the process's memory: on the CPU the estimate plus the process's own overhead.
  const double process = process_overhead_bytes(DeviceKind::kCpu);
  REQUIRE(process > 0);
  const auto bytes_text = [](double b) {
    char text[40];
    std::snprintf(text, sizeof text, "%.0f bytes", b);
    return std::string(text);
  };
  const LayoutDecision cpu = plan_layout(request_of(model, DeviceKind::kCpu, 1, 0, 1, z3 + process));
  CHECK(cpu.refusal == LayoutRefusal::kMemoryBudget);
  CHECK_THAT(cpu.message, Catch::Contains("DDP at 1 rank needs " + bytes_text(ddp + process)) &&
                              Catch::Contains("the process itself " + bytes_text(process)) &&
                              Catch::Contains("over --memory-budget") &&
                              Catch::Contains("--zero-stage 3 at 4 ranks needs " + bytes_text(z3 + process)));
  CHECK(plan_layout(request_of(model, DeviceKind::kCpu, 1, 3, 4, z3 + process)).accepted());
  // The estimate alone no longer fits a budget of its size: the process needs its share too.
  CHECK(plan_layout(request_of(model, DeviceKind::kCpu, 1, 3, 4, z3)).refusal == LayoutRefusal::kMemoryBudget);
  // On cuda no ZeRO stage and no TP degree is suggested: the planner would refuse them.
  const LayoutDecision cuda = plan_layout(request_of(model, DeviceKind::kCuda, 1, 0, 1, z3));
  CHECK(cuda.refusal == LayoutRefusal::kMemoryBudget);
  CHECK(cuda.message.find("--zero-stage") == std::string::npos);
  CHECK(cuda.message.find("--tp") == std::string::npos);
}

TEST_CASE("layout planner: the state kinds each stage shards, and the capabilities", "[layout]") {
  using K = StateKind;
  CHECK(sharded_state_kinds(0).empty());
  CHECK(sharded_state_kinds(1) == std::vector<K>{K::kExpAvg, K::kExpAvgSq});
  CHECK(sharded_state_kinds(2) == std::vector<K>{K::kExpAvg, K::kExpAvgSq, K::kGradients});
  CHECK(sharded_state_kinds(3) == std::vector<K>{K::kExpAvg, K::kExpAvgSq, K::kGradients, K::kParameters});
  const ModelConfig model{65, 32, 48, 2, 2};
  const LayoutPlan z2 = *plan_layout(request_of(model, DeviceKind::kCpu, 1, 2, 2, 0)).plan;
  CHECK(z2.shards(K::kGradients));
  CHECK_FALSE(z2.shards(K::kParameters));
  CHECK(z2.dp == 2);
  CHECK(z2.grad_accum == 6);  // 24 sequences over 2 DP ranks in micro-batches of 2

  const BackendCapabilities& cpu = backend_capabilities(DeviceKind::kCpu);
  const BackendCapabilities& cuda = backend_capabilities(DeviceKind::kCuda);
  CHECK(cpu.tensor_parallel);
  CHECK_FALSE(cuda.tensor_parallel);
  CHECK(cpu.computes_in(Precision::kFp32));
  CHECK_FALSE(cpu.computes_in(Precision::kBf16));
  CHECK(cuda.computes_in(Precision::kBf16));
  for (int s = 0; s <= 3; ++s) CHECK(cpu.runs_zero_stage(s));
  CHECK(cuda.runs_zero_stage(0));
  CHECK_FALSE(cuda.runs_zero_stage(1));
  // What attention keeps is published too, and attention_state_elements_for follows it.
  CHECK(cpu.attention_state == AttentionState::kSoftmaxProbabilities);
  CHECK(cuda.attention_state == AttentionState::kLogSumExp);
  CHECK(attention_state_elements_for(DeviceKind::kCpu, 2, 3, 5) == 2u * 3 * 5 * 5);
  CHECK(attention_state_elements_for(DeviceKind::kCuda, 2, 3, 5) == 2u * 3 * 5);
  // A live CPU backend reports its own device's row.
  CHECK(make_cpu_backend(1)->device() == cpu.device);
}

TEST_CASE("layout planner: scale-bench plan fits a row exactly when the planner accepts it", "[layout]") {
  for (DeviceKind device : kDevices) {
    scaling::PlanOptions o;
    o.params = 1.3e9;
    o.ranks = 8;
    o.micro_batch = 1;
    o.seq_len = 1024;
    o.device = device;
    o.model.busbw_Bps = 10e9;
    o.memory_per_rank = 20e9;  // under DDP's 16 P: on the cpu some layouts fit, some do not
    const scaling::Plan plan = scaling::plan_layouts(o);
    int fits = 0, excluded = 0;
    for (const scaling::PlanRow& r : plan.rows) {
      LayoutRequest q;
      q.model = plan.config;
      q.world = o.ranks;
      q.tp = r.tp;
      q.zero_stage = r.zero_stage;
      q.capabilities = backend_capabilities(device);
      q.micro_batch = o.micro_batch;
      q.global_batch = std::int64_t(o.micro_batch) * o.ranks;
      q.memory_budget = o.memory_per_rank;
      const LayoutDecision d = plan_layout(q);
      INFO(r.layout << " on device " << int(device) << ": " << answer(d));
      CHECK(r.fits == d.accepted());
      fits += r.fits;
      excluded += !r.fits;
      if (device == DeviceKind::kCuda && r.zero_stage > 0) CHECK_THAT(r.reason, Catch::Contains("host-addressable"));
    }
    if (device == DeviceKind::kCpu) CHECK(fits > 0);
    CHECK(excluded > 0);
    if (device == DeviceKind::kCuda) CHECK(plan.tp_degrees == std::vector<int>{1});
  }
}
