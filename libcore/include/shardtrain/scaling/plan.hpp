// scale-bench plan: every DP x TP layout and ZeRO stage of a named GPT-2 shape (kModelPresets), or
// a GPT-2 shaped model of a given size, on a given number of ranks, whether the layout planner (parallel/layout_plan.hpp) accepts it under
// the memory budget, and its step priced by the step model (stepmodel/step_model.hpp, two_level.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/model/config.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/stepmodel/two_level.hpp"

namespace shardtrain::scaling {

// A GPT-2 shaped ModelConfig of about `params` parameters (assumption, documented in the .cpp:
// d_model = 128 x n_layer, d_model a multiple of 64, 64-wide heads, the given vocab and context).
ModelConfig model_for_parameter_count(double params, int vocab, int seq_len);

struct PlanOptions {
  // The model: `shape` exactly when given (a named shape, scale-bench plan --model NAME, its name in
  // `shape_name`; then `params`, `seq_len` and `vocab` are ignored: the shape's own count and fields
  // hold), else the GPT-2 shape of about `params` parameters at `vocab` and `seq_len`
  // (model_for_parameter_count).
  std::optional<ModelConfig> shape;
  std::string shape_name;
  double params = 0;
  int ranks = 1;
  double memory_per_rank = 0;  // bytes
  int micro_batch = 1, seq_len = 1024, vocab = 50257;
  std::int64_t global_batch = 0;  // sequences per optimizer step; 0 = micro_batch x ranks
  double peak_flops = 100e9;      // per rank, for the compute time when the model gives none
  bool deterministic = false;
  DeviceKind device = DeviceKind::kCpu;  // what attention keeps for backward (backend.hpp) depends on it
  StepModel model;                // busbw, alpha, overlap, straggler (and compute_s when > 0)
  // Topology (issue 35): the ranks on `nodes` nodes of ranks / nodes each. With nodes > 1 every
  // layout is planned once per entry of `layouts`: its DP collectives priced by collective_cost on
  // the DP group's topology (nodes x ranks per node / tp: TP groups stay inside a node), its TP
  // collectives on the intra link when known.
  int nodes = 1;
  std::vector<CommLayout> layouts = {CommLayout::kFlat};
};
// One DP x TP layout: `tp` ranks per tensor-parallel group (the degrees the layout planner accepts,
// parallel/layout_plan.hpp: dividing the world, n_head and 4 x d_model, on a device with
// tensor-parallel ops), dp = ranks / tp, and a ZeRO stage over the DP axis. It fits exactly when
// the planner accepts it with --memory-per-rank as the budget (the trainers' answer for the same
// layout). Its memory is estimate_memory's (parallel/memory.hpp) with that tp;
// its step is
//   T = compute + exposed(comm_dp(dp)) + comm_tp(tp) + compute x s x log2(ranks)
// where comm_dp is the stage's collectives of the rank's local gradients/parameters (P_local =
// the TP rank's share, ParameterRegistry with that tp) over the dp ranks, exposed by the step
// model's rule (step_model.hpp: DDP's all-reduces and the reduce-scatters hide behind backward,
// ZeRO's parameter gathers for the forward pass behind forward), and comm_tp the
// activation sums of GptModel's tensor-parallel forward and backward over the tp ranks, which sit
// on the critical path (not overlapped). Per micro-batch, N = micro_batch x seq_len, C = d_model:
// 4 L + 2 all-reduces of 4 N C bytes (embedding, two per block forward and two backward, the LM
// head), one all-gather of 4 N tp bytes (row maxima) and one all-reduce of 8 N bytes (the
// vocab-parallel cross-entropy's sums); times grad_accum per step.
struct PlanRow {
  std::string layout;  // "DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"; under TP "<that> x TP<t>"; on several nodes ", flat" etc.
  int zero_stage = 0;
  int dp = 1, tp = 1;
  int grad_accum = 1;  // micro-batches per DP rank per step
  MemoryEstimate memory;  // what --memory-budget holds against the budget (the trainers' answer)
  double resident = 0;    // the process's predicted resident peak: memory + process_overhead_bytes
  bool fits = false;
  std::string reason;  // why it is excluded ("" when it fits): the bytes over the budget, or the planner's refusal
  StepTerms predicted;  // comm_s = dp_comm_s + tp_comm_s
  double dp_comm_s = 0, tp_comm_s = 0;
  std::vector<StepCollective> collectives;     // over the DP axis
  std::vector<StepCollective> tp_collectives;  // over the TP axis (empty at tp = 1)
};
struct Plan {
  ModelConfig config;
  std::string model_name;  // the named shape planned ("gpt2-small"), "" when sized by --params
  double params = 0;       // asked for: --params, or the named shape's own count
  int grad_accum = 1;  // at tp = 1
  double compute_s = 0;
  std::vector<int> tp_degrees;  // the tensor-parallel degrees planned (1 first)
  std::string tp_note;          // why only TP 1 is planned ("" otherwise)
  std::vector<PlanRow> rows;  // fitting layouts by predicted throughput (descending), then the excluded
  std::string text() const;
  nlohmann::json to_json() const;
};
Plan plan_layouts(const PlanOptions& options);

}  // namespace shardtrain::scaling
