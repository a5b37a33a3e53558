// Tensor parallelism (parameters.hpp, gpt.hpp): the local layout of every tensor, layout-
// independent initialisation (a TP shard is bitwise the slice of the unsplit tensor), and the split
// model against the unsplit one. The [mpi] case runs under mpirun -np 1, 2 and 4 with TP = the
// world: the column-parallel (qkv, fc), row-parallel (attn.proj, mlp.proj), vocab-parallel
// embedding and LM head and the vocab-parallel cross-entropy together must give the unsplit
// model's loss within 1e-6 relative and each tensor's gradient within kGradTolerance.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/model/init.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/parallel/strategy.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

// Gradient tolerance, relative to the tensor's largest gradient element: the split model adds the
// row-parallel partial products, the LayerNorm-input gradients and the cross-entropy sums in
// another order than the unsplit one, each a few fp32 roundings (2^-24 ~ 6e-8) of terms of the
// tensor's scale; backward compounds them over 2 layers. Measured worst: 5.7e-7 (T = 2) and
// 5.2e-7 (T = 4) of the tensor's largest element (the WARN line prints it each run).
constexpr double kGradTolerance = 1e-5;

// Vocabulary 255 is not a multiple of 2 or 4: the last rank's wte rows include padding.
const ModelConfig kConfig{255, 16, 64, 2, 4};

// Scatters a local tensor's elements into its logical tensor (nothing for padding).
void scatter_local(const ParameterInfo& t, const TensorParallelPlace& place, const float* local, float* logical) {
  for (const LogicalRun& run : logical_runs(t, place))
    std::copy(local + run.local_offset, local + run.local_offset + run.count, logical + run.logical_offset);
}

}  // namespace

TEST_CASE("tp: local shards of every tensor cover each logical element exactly once", "[tp]") {
  const ParameterRegistry full(kConfig);
  for (int T : {2, 4}) {
    std::vector<std::vector<int>> seen;
    for (const auto& t : full.tensors()) seen.emplace_back(t.numel, 0);
    for (int r = 0; r < T; ++r) {
      const ParameterRegistry local(kConfig, {T, r});
      REQUIRE(local.tensors().size() == full.tensors().size());
      for (std::size_t i = 0; i < local.tensors().size(); ++i) {
        const auto& t = local.tensors()[i];
        CHECK(t.name == full.tensors()[i].name);
        CHECK(t.logical_shape == full.tensors()[i].shape);
        for (const LogicalRun& run : logical_runs(t, {T, r})) {
          REQUIRE(run.local_offset + run.count <= t.numel);
          for (std::size_t k = 0; k < run.count; ++k) ++seen[i][run.logical_offset + k];
        }
      }
    }
    for (std::size_t i = 0; i < seen.size(); ++i) {
      const bool replicated = ParameterRegistry(kConfig, {T, 0}).tensors()[i].split == TpSplit::kReplicated;
      const int expected = replicated ? T : 1;  // a replicated tensor: once per rank
      INFO("T=" << T << " tensor " << full.tensors()[i].name);
      CHECK(std::all_of(seen[i].begin(), seen[i].end(), [&](int n) { return n == expected; }));
    }
  }
}

TEST_CASE("tp: local shapes follow Megatron's split and the vocabulary is padded to a multiple of T", "[tp]") {
  const ParameterRegistry r(kConfig, {4, 3});
  const std::int64_t C = kConfig.d_model;
  CHECK(r.find("wte.weight").shape == std::vector<std::int64_t>{64, C});  // 255 -> 256 rows / 4
  CHECK(r.find("h.0.attn.qkv.weight").shape == std::vector<std::int64_t>{3 * C / 4, C});
  CHECK(r.find("h.0.attn.proj.weight").shape == std::vector<std::int64_t>{C, C / 4});
  CHECK(r.find("h.0.mlp.fc.weight").shape == std::vector<std::int64_t>{C, C});
  CHECK(r.find("h.0.mlp.proj.weight").shape == std::vector<std::int64_t>{C, C});
  CHECK(r.find("h.0.mlp.proj.bias").shape == std::vector<std::int64_t>{C});
  CHECK(r.find("h.0.ln_1.weight").split == TpSplit::kReplicated);
  // Rank 3's 64 vocabulary rows start at 192: 63 real ones, one padding row outside every run.
  const auto runs = logical_runs(r.find("wte.weight"), {4, 3});
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].logical_offset == 192 * std::size_t(C));
  CHECK(runs[0].count == 63 * std::size_t(C));
}

TEST_CASE("tp: a shape that does not divide is refused naming the numbers", "[tp]") {
  CHECK_THROWS_WITH(validate_tensor_parallel(kConfig, 3), Catch::Contains("4 attention heads"));
  CHECK_THROWS_WITH(validate_tensor_parallel(kConfig, 2, 3), Catch::Contains("world of 3 ranks"));
  CHECK_THROWS_AS(ParameterRegistry(ModelConfig{256, 16, 48, 1, 6}, {4, 0}), UsageError);
  CHECK_NOTHROW(validate_tensor_parallel(kConfig, 4, 8));
}

TEST_CASE("tp: every shard initialises bitwise to the slice of the unsplit tensor, padding to zero", "[tp]") {
  const ParameterRegistry full(kConfig);
  const std::vector<float> whole = init_parameters(full, 1234, kConfig.n_layer);
  for (int T : {2, 4})
    for (int r = 0; r < T; ++r) {
      const ParameterRegistry local(kConfig, {T, r});
      const std::vector<float> mine = init_parameters(local, 1234, kConfig.n_layer);
      std::size_t checked = 0, padding = 0;
      for (std::size_t i = 0; i < local.tensors().size(); ++i) {
        const auto& t = local.tensors()[i];
        const float* logical = whole.data() + full.tensors()[i].offset;
        std::vector<bool> covered(t.numel, false);
        for (const LogicalRun& run : logical_runs(t, {T, r}))
          for (std::size_t k = 0; k < run.count; ++k) {
            covered[run.local_offset + k] = true;
            // memcmp-equal: bitwise, not merely equal as floats
            REQUIRE(std::memcmp(&mine[t.offset + run.local_offset + k], &logical[run.logical_offset + k],
                                sizeof(float)) == 0);
            ++checked;
          }
        for (std::size_t k = 0; k < t.numel; ++k)
          if (!covered[k]) {
            REQUIRE(mine[t.offset + k] == 0.0f);
            ++padding;
          }
      }
      CHECK(checked + padding == local.total());
      CHECK(padding == (r == T - 1 ? std::size_t(kConfig.d_model) : 0));  // one padding row, on the last rank
    }
}

TEST_CASE("tp: the split model's loss and every gradient equal the unsplit model's", "[mpi][tp]") {
  auto comm = test::test_communicator(MPI_COMM_WORLD, "tp");
  const int T = comm->size();
  REQUIRE(kConfig.n_head % T == 0);  // run at 1, 2 and 4 ranks
  auto backend = make_cpu_backend(1);
  const int batch = 2;
  const std::size_t S = kConfig.seq_len;
  std::mt19937 rng(11);  // the same tokens on every rank: one TP group sees one micro-batch
  std::vector<std::int32_t> tokens(batch * (S + 1));
  for (auto& t : tokens) t = std::int32_t(rng() % kConfig.vocab);
  const float scale = 1.0f / float(batch * S);

  GptModel whole(*backend, kConfig, batch);
  whole.set_parameters(init_parameters(whole.registry(), 5, kConfig.n_layer));
  whole.zero_grads();
  const double whole_loss = whole.train_micro_batch(tokens.data(), batch, scale);
  const std::vector<float> whole_grads = whole.download_gradients();

  GptModel split(*backend, kConfig, batch, true, comm.get());
  split.set_parameters(init_parameters(split.registry(), 5, kConfig.n_layer));
  split.zero_grads();
  const double split_loss = split.train_micro_batch(tokens.data(), batch, scale);
  const std::vector<float> local_grads = split.download_gradients();

  // Forward: the loss within 1e-6 relative (fp32 partial sums in another order: about 1e-7).
  INFO("TP " << T << ": loss " << whole_loss << " vs " << split_loss);
  CHECK(std::abs(split_loss - whole_loss) <= 1e-6 * std::abs(whole_loss));

  // Backward: gather every rank's local gradients, scatter them into logical tensors, compare each
  // tensor with the unsplit gradient relative to the tensor's largest element.
  std::vector<float> every(local_grads.size() * T);
  comm->all_gather(local_grads.data(), every.data(), local_grads.size());
  double worst = 0;
  for (std::size_t i = 0; i < whole.registry().tensors().size(); ++i) {
    const auto& full_t = whole.registry().tensors()[i];
    std::vector<float> logical(full_t.numel, std::nanf(""));
    for (int r = 0; r < T; ++r) {
      const ParameterRegistry local(kConfig, {T, r});
      const auto& t = local.tensors()[i];
      scatter_local(t, {T, r}, every.data() + std::size_t(r) * local_grads.size() + t.offset, logical.data());
    }
    double max_abs = 0, max_diff = 0;
    for (std::size_t k = 0; k < full_t.numel; ++k) {
      const double g = whole_grads[full_t.offset + k];
      max_abs = std::max(max_abs, std::abs(g));
      max_diff = std::max(max_diff, std::abs(double(logical[k]) - g));  // NaN (uncovered) fails below
      REQUIRE(!std::isnan(logical[k]));
    }
    const double rel = max_abs > 0 ? max_diff / max_abs : max_diff;
    worst = std::max(worst, rel);
    INFO("TP " << T << " " << full_t.name << ": max |diff| / max |g| = " << rel);
    CHECK(rel <= kGradTolerance);
  }
  if (comm->rank() == 0) WARN("TP " << T << ": worst gradient difference " << worst << " of the tensor's max");
}

TEST_CASE("tp: measured model state per rank within 5% of the formulas on the local model, activations exact",
          "[mpi][tp]") {
  auto world = test::test_communicator(MPI_COMM_WORLD, "tp-mem");
  const int W = world->size();
  auto backend = make_cpu_backend(1);
  const ModelConfig config{256, 32, 256, 2, 4};  // P ~ 1.65M: unit padding stays well under 5%
  OptimizerConfig opt;
  const int micro = 2;
  const std::size_t S = config.seq_len;
  std::mt19937 rng(3);
  std::vector<std::int32_t> tokens(std::size_t(micro) * (S + 1));
  for (auto& t : tokens) t = std::int32_t(rng() % 256);
  const double P_full = double(ParameterRegistry(config).total());
  for (int T : {1, 2, 4}) {
    if (T > W || W % T != 0) continue;
    auto tp = world->split(world->rank() / T, world->rank(), "tp");
    auto dp = world->split(world->rank() % T, world->rank(), "dp");
    const int N = dp->size();
    const double P = double(ParameterRegistry(config, {T, tp->rank()}).total());
    // The local model by hand: wte Vp/T rows, wpe whole; per layer the split matrices and biases
    // (12C^2 + 7C)/T: qkv 3C^2/T + 3C/T, proj C^2/T, fc 4C^2/T + 4C/T, mlp.proj 4C^2/T) and
    // the replicated LayerNorms (4C) and row-parallel biases (2C); ln_f 2C.
    const double C = config.d_model, Vp = double(padded_vocab(config, T));
    const double by_hand = Vp / T * C + config.seq_len * C +
                           config.n_layer * ((12 * C * C + 7 * C) / T + 6 * C) + 2 * C;
    CHECK(P == by_hand);
    CHECK(P_full == double(config.parameter_count()));
    CHECK(GptModel(*backend, config, micro, false, T > 1 ? tp.get() : nullptr).activation_bytes() ==
          GptModel::activation_bytes_for(config, micro, T, DeviceKind::kCpu));
    for (int stage = 1; stage <= 3; ++stage) {
      StrategyOptions so;
      so.zero_stage = stage;
      so.micro_batch = micro;
      so.tp_comm = T > 1 ? tp.get() : nullptr;
      auto strategy = make_strategy(*backend, *dp, config, opt, so);
      strategy->initialise(1);
      const StepResult r = strategy->run_step(0, tokens.data(), 1, micro, double(micro * S * N));
      CHECK(std::isfinite(r.grad_norm));
      const auto report = strategy->memory_report();
      const double measured = report.model_state;
      const double formula = stage == 1 ? 8 * P + 8 * P / N : stage == 2 ? 4 * P + 12 * P / N : 16 * P / N;
      const MemoryEstimate e = estimate_memory(config, stage, W, micro, 1, false, T, DeviceKind::kCpu);
      INFO("TP " << T << " DP " << N << " stage " << stage << ": measured " << measured << " formula " << formula
                 << " estimate " << e.model_state);
      CHECK(std::abs(measured - formula) <= 0.05 * formula);
      CHECK(std::abs(e.model_state - measured) <= 0.05 * measured);
      CHECK(report.bytes(MemoryCategory::kActivations) == double(GptModel::activation_bytes_for(config, micro, T, DeviceKind::kCpu)));
      if (world->rank() == 0)
        std::printf("[tp memory] TP %d DP %d ZeRO-%d: model_state %.0f formula %.0f (%.2f%%), activations %.0f\n", T, N,
                    stage, measured, formula, 100.0 * (measured - formula) / formula,
                    report.bytes(MemoryCategory::kActivations));
    }
  }
}
