// The layout planner: the ONE place that decides whether a training layout may run, and what it
// places where. The trainers' set-up (train/ plan_training_layout, with --memory-budget),
// scale-bench plan (scaling/plan.hpp) and the ZeRO strategy (the state kinds it shards) all
// take its answer, so they cannot disagree: a layout the planner accepts is one the trainers run,
// and a refusal names the same reason everywhere.
//
// Input: the model, the parallelism (W = DP x TP ranks, a ZeRO stage; the node topology, nodes x
// ranks per node, joins LayoutRequest when the trainers place ranks by node), the backend's
// published capabilities (backend/capabilities.hpp), the batch schedule and a memory budget per rank.
// Output: a LayoutPlan, or a typed refusal (LayoutRefusal + a one-line message for the user).
// Pure: no communicator, device or file; the same request gives the same answer on every rank.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/capabilities.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/train_state.hpp"
#include "shardtrain/parallel/memory.hpp"

namespace shardtrain {

struct LayoutRequest {
  ModelConfig model;            // validated, vocabulary resolved
  int world = 1;                // W ranks in all (W = DP x TP)
  int tp = 1;                   // tensor-parallel degree T (--tp)
  int zero_stage = 0;           // 0 DDP, 1, 2, 3 (--zero-stage)
  BackendCapabilities capabilities;   // of the backend the layout would run on
  std::optional<Precision> precision; // --precision; nullopt: the backend's default
  int micro_batch = 1;                // sequences per forward (--micro-batch)
  std::int64_t global_batch = 1;      // sequences per step, all ranks (--global-batch)
  bool deterministic = false;         // exact sums (their buffers count against the budget)
  double memory_budget = 0;           // bytes per rank (--memory-budget); 0: no budget
};

// Why a layout is refused, in the order the planner checks (the first that applies is reported).
enum class LayoutRefusal {
  kWorld,                // W < 1
  kZeroStage,            // a stage outside 0..3
  kPrecision,            // the backend does not compute in the requested precision
  kTensorParallelDevice, // --tp > 1 on a backend without tensor-parallel ops
  kTensorParallelShape,  // T does not divide n_head or 4 x d_model (or T < 1)
  kTensorParallelWorld,  // T does not divide W
  kZeroDevice,           // the backend does not run this ZeRO stage
  kMemoryBudget,         // the estimate per rank exceeds --memory-budget
};
// "world", "zero_stage", "precision", "tensor_parallel_device", "tensor_parallel_shape",
// "tensor_parallel_world", "zero_device", "memory_budget" (JSON, tests, messages).
const char* layout_refusal_name(LayoutRefusal reason);

// An accepted layout.
struct LayoutPlan {
  int world = 1, dp = 1, tp = 1, zero_stage = 0;
  Precision precision = Precision::kFp32;  // resolved (the backend's default when not requested)
  int grad_accum = 1;                      // micro-batches per DP rank per step (at least 1)
  // The state kinds sharded over the DP ranks (the others are whole on every DP rank):
  // stage 1 the AdamW moments, stage 2 also the gradients, stage 3 also the parameters; DDP none.
  std::vector<StateKind> sharded;
  MemoryEstimate memory;                   // per rank (memory.hpp estimate_memory)
  bool shards(StateKind kind) const;
  std::string describe() const;            // "ZeRO-2 x TP 2 at 4 ranks (dp 2)"
};

// The state kinds ZeRO stage `stage` (0..3) shards: the one table behind LayoutPlan::sharded.
std::vector<StateKind> sharded_state_kinds(int stage);

// The planner's answer: a plan, or a refusal with its message.
struct LayoutDecision {
  std::optional<LayoutPlan> plan;
  std::optional<LayoutRefusal> refusal;  // set exactly when plan is not
  std::string message;                   // the refusal's one line ("" when accepted)
  bool accepted() const { return plan.has_value(); }
  // The plan, or throws LayoutRefused carrying the refusal (exit code 2).
  const LayoutPlan& value() const;
};

// A refused layout as an exception: a UsageError (exit 2, the message) that keeps its reason.
class LayoutRefused : public UsageError {
 public:
  LayoutRefused(LayoutRefusal reason, const std::string& message) : UsageError(message), reason_(reason) {}
  LayoutRefusal reason() const { return reason_; }

 private:
  LayoutRefusal reason_;
};

// The planner. A memory refusal's message names the bytes needed per rank (model state, working
// buffers, activations) and a layout on the same backend that fits: a higher ZeRO stage, a larger
// TP degree on the same ranks, or ZeRO-3 on more ranks (the first that fits), when one does.
// A request with micro_batch or global_batch below 1 is no layout question but a usage error of
// its caller: UsageError naming --micro-batch or --global-batch (never a division by zero).
LayoutDecision plan_layout(const LayoutRequest& request);

}  // namespace shardtrain
