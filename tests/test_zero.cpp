// ZeRO layout and memory accounting (zero.hpp): shard ranges at chunk boundaries covering every
// unit once, and measured model-state bytes per rank within 5% of the ARCHITECTURE.md formulas
// (DDP 16P; ZeRO-1 8P + 8P/N; ZeRO-2 4P + 12P/N; ZeRO-3 16P/N plus the gathered working units)
// after a real step. The [mpi] case runs under mpirun -np 1, 2 and 4.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <cmath>
#include <random>

#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/parallel/strategy.hpp"
#include "shardtrain/parallel/zero.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {
// The world's communicator for one [mpi] case: its own name and run folder, a minute's timeout.
std::unique_ptr<Communicator> world_communicator(const std::string& name) {
  test::ensure_mpi();
  CommOptions o;
  o.name = name;
  o.timeout = std::chrono::milliseconds(60000);
  o.run_dir = test::temp_dir(name);
  return make_mpi_communicator(MPI_COMM_WORLD, o);
}
}  // namespace

TEST_CASE("zero: shard layout pads units to W x chunk and covers each unit exactly once", "[zero]") {
  const ModelConfig config{256, 32, 48, 2, 2};
  const ParameterRegistry registry(config);
  for (int world : {1, 2, 4, 8}) {
    std::vector<int> covered(registry.total(), 0);
    for (int rank = 0; rank < world; ++rank) {
      const ShardLayout layout(registry, world, rank);
      REQUIRE(layout.units().size() == registry.units().size());
      for (const auto& s : layout.units()) {
        CHECK(s.padded % (std::size_t(world) * Backend::kReductionChunk) == 0);
        CHECK(s.padded >= s.size());
        if (s.own_begin < s.own_end) CHECK((s.own_begin - s.begin) % Backend::kReductionChunk == 0);
        for (std::size_t i = s.own_begin; i < s.own_end; ++i) ++covered[i];
      }
      CHECK(layout.shard_total() * world == layout.padded_total());
    }
    for (int c : covered) REQUIRE(c == 1);
  }
}

TEST_CASE("zero: activation_bytes_for matches a built model", "[zero]") {
  auto backend = make_cpu_backend(1);
  const ModelConfig config{256, 32, 48, 2, 2};
  GptModel model(*backend, config, 3);
  CHECK(GptModel::activation_bytes_for(config, 3, 1, DeviceKind::kCpu) == model.activation_bytes());
}

// What attention keeps for backward is the backend's: the CPU backend's probabilities (B*NH*T*T
// floats, what a built CPU model allocates) and CUDA's fused attention's one log-sum-exp per query
// row (B*NH*T, the layout documented in backend.hpp; checked here without a device). The estimate
// for a CUDA run therefore differs from the CPU one by exactly n_layer x B x NH x (T*T - T) floats.
TEST_CASE("zero: the activation estimate asks the backend what attention keeps", "[zero]") {
  const std::size_t B = 3, NH = 2, T = 48;
  auto cpu = make_cpu_backend(1);
  CHECK(cpu->attention_state_elements(B, NH, T) == B * NH * T * T);
  CHECK(attention_state_elements_for(DeviceKind::kCpu, B, NH, T) == B * NH * T * T);
  CHECK(attention_state_elements_for(DeviceKind::kCuda, B, NH, T) == B * NH * T);
  const ModelConfig config{256, 48, 32, 2, 2};  // vocab, seq_len T, d_model, layers, heads
  const std::size_t cpu_bytes = GptModel::activation_bytes_for(config, int(B), 1, DeviceKind::kCpu);
  const std::size_t cuda_bytes = GptModel::activation_bytes_for(config, int(B), 1, DeviceKind::kCuda);
  CHECK(cpu_bytes - cuda_bytes == std::size_t(config.n_layer) * B * NH * (T * T - T) * sizeof(float));
  // The planner and --memory-budget follow: the same layout needs less on CUDA, by the same bytes.
  const MemoryEstimate on_cpu = estimate_memory(config, 0, 1, int(B), 1, false, 1, DeviceKind::kCpu);
  const MemoryEstimate on_cuda = estimate_memory(config, 0, 1, int(B), 1, false, 1, DeviceKind::kCuda);
  CHECK(on_cpu.model_state == on_cuda.model_state);
  CHECK(on_cpu.activations - on_cuda.activations == double(cpu_bytes - cuda_bytes));
}

TEST_CASE("zero: measured model-state bytes per rank within 5% of the formulas", "[mpi][zero]") {
  auto comm = world_communicator("zero-test");
  const int W = comm->size();
  auto backend = make_cpu_backend(1);
  const ModelConfig config{256, 32, 256, 2, 4};  // P ~ 1.65M: unit padding stays well under 5%
  OptimizerConfig opt;
  const int micro = 2;
  const std::size_t T = config.seq_len;
  std::mt19937 rng(7 + comm->rank());
  std::vector<std::int32_t> tokens(std::size_t(micro) * (T + 1));
  for (auto& t : tokens) t = std::int32_t(rng() % 256);
  const double P = double(ParameterRegistry(config).total());
  for (int stage = 0; stage <= 3; ++stage) {
    StrategyOptions so;
    so.zero_stage = stage;
    so.micro_batch = micro;
    so.grad_accum = 1;
    auto strategy = make_strategy(*backend, *comm, config, opt, so);
    strategy->initialise(1);
    const StepResult r = strategy->run_step(0, tokens.data(), 1, micro, double(micro * T * W));
    CHECK(std::isfinite(r.grad_norm));
    const auto report = strategy->memory_report();
    const double measured = report.model_state;
    const double formula = stage == 0   ? 16 * P
                           : stage == 1 ? 8 * P + 8 * P / W
                           : stage == 2 ? 4 * P + 12 * P / W
                                        : 16 * P / W;
    INFO("stage " << stage << " W " << W << " measured " << measured << " formula " << formula);
    CHECK(std::abs(measured - formula) <= 0.05 * formula);
    if (stage >= 1) {
      const MemoryEstimate e = estimate_memory(config, stage, W, micro, 1, false, 1, DeviceKind::kCpu);
      CHECK(report.total <= e.total());
      if (stage == 3) {  // the gathered working set: at most embeddings + ln_f + two blocks, params and grads
        const double gathered = report.bytes(MemoryCategory::kGathered);
        CHECK(gathered > 0);
        CHECK(gathered <= e.gathered);
      }
      if (comm->rank() == 0)
        std::printf("[zero memory] stage %d W %d: model_state %.0f formula %.0f (%.2f%%), gathered %.0f, total %.0f\n",
                    stage, W, measured, formula, 100.0 * (measured - formula) / formula,
                    report.bytes(MemoryCategory::kGathered), report.total);
    }
  }
}

TEST_CASE("zero: stages 1-2 send the updated parameters when the next forward begins, not at the step's end",
          "[mpi][zero]") {
  // Launched at the end of the step, the parameter all-gathers sat ahead of the step loop's own
  // collectives between steps (the stop flag's all-reduce) on the group's one engine, which then
  // waited for all of them: a whole gather exposed every step, in no phase. Counted here by the
  // group's all-gather calls: after a step only its gradient-norm gather has gone out; the
  // parameters' go out as the next forward begins (one per unit), or when a reader between steps
  // asks for the full parameters.
  auto comm = world_communicator("zero-gathers");
  const int W = comm->size();
  if (W < 2) return;  // one rank gathers nothing
  auto backend = make_cpu_backend(1);
  const ModelConfig config{64, 16, 32, 2, 2};
  const double units = double(ParameterRegistry(config).units().size());
  OptimizerConfig opt;
  std::mt19937 rng(11 + comm->rank());
  std::vector<std::int32_t> tokens(2 * std::size_t(config.seq_len + 1));
  for (auto& t : tokens) t = std::int32_t(rng() % 64);
  const auto gathers = [&] { return double(comm->stats().per_op[int(CollectiveOp::kAllGather)].calls); };
  for (int stage : {1, 2}) {
    INFO("stage " << stage);
    StrategyOptions so;
    so.zero_stage = stage;
    so.micro_batch = 2;
    so.grad_accum = 1;
    auto strategy = make_strategy(*backend, *comm, config, opt, so);
    strategy->initialise(1);
    const double before = gathers();
    strategy->run_step(0, tokens.data(), 1, 2, double(2 * config.seq_len * W));
    CHECK(gathers() == before + 1);  // the gradient norm's; the parameters' are due, not sent
    std::int32_t stop = 0;
    comm->all_reduce(&stop, 1);  // what the step loop does between steps: nothing queued ahead of it
    CHECK(gathers() == before + 1);
    strategy->run_step(1, tokens.data(), 1, 2, double(2 * config.seq_len * W));
    CHECK(gathers() == before + 1 + units + 1);  // sent as the forward began, then this step's norm
    const std::vector<float> params = strategy->replicated_parameters();  // a reader: sends the due ones
    CHECK(gathers() == before + 2 + 2 * units);
    REQUIRE(!params.empty());
    // Every rank's full parameters are the same once the due gathers are in.
    double sum = 0;
    for (float v : params) sum += double(v);
    std::vector<double> sums(static_cast<std::size_t>(W));
    comm->all_gather(&sum, sums.data(), 1);
    for (double other : sums) CHECK(other == sum);
  }
}
