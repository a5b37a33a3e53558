// The one optimizer step of every layout (DDP's StepRunner, the ZeRO stages): the timed
// micro-batch loop, the local loss sum, the global-norm clip and the update. What differs
// between layouts -- where gradients live, how they are reduced, how the norm is rebuilt,
// which parameters the optimizer updates -- is a StepHooks implementation; the order of the
// calls below, and so every floating-point sum, is the same for all of them (contract 2 of docs/ARCHITECTURE.md).
//
// One step, in this order:
//   begin_step()
//   per micro-batch m:  forward + loss + synchronize                 -> timing.forward_s
//                       before_backward(m), backward + synchronize,
//                       after_backward(m)                             -> timing.backward_s
//                       the micro-batch's loss sum is kept (per micro-batch, in local order)
//   finish_reduction(loss sums)  -> the global loss sum, gradients reduced
//   grad norm = sqrt(gradient_norm_squared()); non-finite loss or norm: NumericalError
//   scale_gradients(clip factor) when the factor is not 1; lr from the schedule
//   apply_update(step, lr), synchronize, share_updated_parameters()  -> timing.optimizer_s
//   timing.comm_exposed_s = exposed_seconds()
#pragma once
#include <cstdint>
#include <vector>

#include "shardtrain/model/gpt.hpp"
#include "shardtrain/model/optim.hpp"
#include "shardtrain/parallel/ddp.hpp"
#include "shardtrain/parallel/train_step.hpp"

namespace shardtrain {

class StepHooks {
 public:
  virtual ~StepHooks() = default;
  // Gradient buffers to zero (or as the layout needs them) before the first micro-batch.
  virtual void begin_step() = 0;
  // Around the backward of micro-batch m (0-based, of this rank's micro-batches).
  virtual void before_backward(int /*micro_batch*/) {}
  virtual void after_backward(int /*micro_batch*/) {}
  // Completes the gradient reduction of the step and sums this rank's per-micro-batch loss sums
  // over the ranks by the mode's rule (reduce_loss_sums, exact_sum.hpp); returns the global loss
  // sum. Time blocked here counts in exposed_seconds().
  virtual double finish_reduction(const std::vector<double>& micro_batch_loss_sums) = 0;
  // Squared global gradient norm, bitwise equal to grad_norm_squared over the full gradient
  // (optim.hpp: per-unit chunk sums, units in order), whatever the layout.
  virtual double gradient_norm_squared() = 0;
  virtual void scale_gradients(float factor) = 0;
  // AdamW on the parameters this rank updates.
  virtual void apply_update(std::int64_t step, double lr) = 0;
  // After the update has completed on the device: make updated parameters visible where the
  // layout needs them (ZeRO-1/2: all-gather of the shards; counts as exposed communication).
  virtual void share_updated_parameters() {}
  // Seconds of this step blocked waiting for communication.
  virtual double exposed_seconds() const = 0;
};

// Runs optimizer step `step` (0-based) over `micro_batches` micro-batches of `micro_batch`
// sequences laid out one after another in `tokens` (micro_batches * micro_batch * (T+1) int32),
// every token's loss weighing 1/global_tokens.
StepResult run_micro_batch_step(GptModel& model, StepHooks& hooks, const OptimizerConfig& optimizer,
                                std::int64_t step, const std::int32_t* tokens,
                                int micro_batches, int micro_batch, double global_tokens);

}  // namespace shardtrain
