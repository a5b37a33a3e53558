// A training strategy: how the model's state is laid out over the data-parallel ranks and how one
// optimizer step runs on that layout. The trainer (trainer.hpp) drives data, logs, evaluation and
// checkpoints through this interface only, so DDP (full replicas, ddp.hpp) and the ZeRO stages
// (sharded optimizer state, gradients, parameters) share one training loop, one step log and one
// checkpoint format (logical tensors, contract 3 of docs/ARCHITECTURE.md).
//
// Every method is called on every rank in the same order; methods marked collective communicate.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/model/optim.hpp"
#include "shardtrain/model/train_state.hpp"
#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/parallel/train_step.hpp"

namespace shardtrain {

class TrainingStrategy {
 public:
  virtual ~TrainingStrategy() = default;

  // One line for logs, e.g. "DDP, fast mode, 4 gradient buckets".
  virtual std::string describe() const = 0;
  virtual const ParameterRegistry& registry() const = 0;
  // ZeRO stage of the layout (0 for DDP), written into checkpoint manifests.
  virtual int zero_stage() const = 0;

  // Initial parameters (contract 4): each rank fills exactly the elements it holds.
  virtual void initialise(std::uint64_t seed) = 0;

  // Collective: optimizer step `step` (0-based) over this rank's micro-batches (micro_batches x
  // micro_batch sequences of T+1 tokens, laid out one after another); every token's loss weighs
  // 1/global_tokens. Returns the global loss sum, gradient norm, clip factor, lr and timings.
  virtual StepResult run_step(std::int64_t step, const std::int32_t* tokens, int micro_batches, int micro_batch,
                              double global_tokens) = 0;

  // This rank's pieces of the logical checkpoint tensors (train_state.hpp's checkpoint_tensors
  // order: parameters, optim.exp_avg.*, optim.exp_avg_sq.*); host memory valid until the next
  // run_step. The pieces of all ranks cover every tensor exactly once.
  virtual std::vector<ckpt::PieceView> checkpoint_pieces() = 0;
  // Reads this rank's state from a checkpoint of any layout, in one CheckpointReader::read_batch:
  // local reads only, no collective, since a resume validates the checkpoint while this reads it and
  // may refuse it afterwards (then restore is called again with an older one, or initialise).
  // Then settle_restored() on every rank.
  virtual void restore(const ckpt::CheckpointReader& reader) = 0;
  // Collective: completes a restore every rank finished (ZeRO all-gathers the full parameters).
  virtual void settle_restored() {}

  // Collective: calls fn on rank 0 with a model holding the full current parameters (hold-out
  // evaluation, the final params.h5); other ranks only take part in any gathering.
  virtual void with_full_model(const std::function<void(GptModel&)>& fn) = 0;
  // Collective: calls fn on rank 0 with every parameter tensor of the full model in registry
  // order, its values float32 in host memory valid during the call (its logical shape: the full
  // model's registry); other ranks only take part in any gathering. For writing the parameters
  // out: a layout whose ranks lack a full replica (ZeRO-3) gathers one unit at a time instead of
  // building a whole model beside its state (with_full_model: activations and all, 1.1-1.6 GB more
  // on rank 0 at GPT-2 small). This default goes through with_full_model.
  virtual void for_each_full_parameter(const std::function<void(const ParameterInfo&, const float*)>& fn);
  // The full flat parameters when every rank holds a replica (for --check-replicas), else empty.
  virtual std::vector<float> replicated_parameters() = 0;

  // Peak bytes per category on this rank (parameters, gradients, optimizer, gathered,
  // communication, activations) and their sum (memory.hpp MemoryReport). DDP reports its fixed
  // layout (16P of model state); ZeRO its tracked peaks beside the formula.
  virtual MemoryReport memory_report() const = 0;
};

// What make_strategy needs besides the model and optimizer configs.
struct StrategyOptions {
  int zero_stage = 0;           // 0: DDP; 1, 2, 3: ZeRO (the layout planner's to accept: layout_plan.hpp)
  // ZeRO: the state kinds sharded over the DP ranks, the plan's LayoutPlan::sharded (the trainers
  // pass it); empty: sharded_state_kinds(zero_stage), the planner's table.
  std::vector<StateKind> sharded;
  bool deterministic = false;   // exact order-independent sums (contract 2, exact_sum.hpp)
  double bucket_mb = 4.0;       // DDP gradient buckets
  int micro_batch = 1;          // sequences per forward (activation buffers)
  int grad_accum = 1;           // micro-batches per rank per step
  bool reshard_after_forward = true;  // ZeRO-3: free a gathered unit after its forward
  // Tensor parallelism: the TP group (nullptr: none). The strategy's communicator is then the
  // data-parallel group of this rank's TP position; the model holds this rank's TP shards
  // (gpt.hpp) and the strategy lays them out over the DP group as it would a whole model.
  Communicator* tp_comm = nullptr;
};

// The DDP strategy (full replicas; ddp.hpp's reducer). The ZeRO strategies come from
// make_zero_strategy (zero.hpp) when built; make_strategy dispatches on options.zero_stage.
std::unique_ptr<TrainingStrategy> make_ddp_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                    const OptimizerConfig& optimizer, const StrategyOptions& options);
std::unique_ptr<TrainingStrategy> make_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                const OptimizerConfig& optimizer, const StrategyOptions& options);

}  // namespace shardtrain
