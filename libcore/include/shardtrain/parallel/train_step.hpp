// One optimizer step on one rank with full (flat) parameter and gradient buffers: gradient
// accumulation over micro-batches, global-norm clipping, learning-rate schedule and AdamW, with
// the time of each phase measured. The step itself is the micro-batch loop every layout shares
// (src/parallel/micro_batch_loop.hpp); StepRunner supplies the flat buffers and, with data
// parallelism, DDP's GradientReducer. A step with a non-finite loss or gradient norm throws
// NumericalError naming the step, before anything is updated.
//
// The loss objective is the mean token loss over the global batch: every token's loss has
// weight 1 / global_tokens, so gradients accumulated over micro-batches (and, with data
// parallelism, summed over ranks) are already the global mean's gradient.
#pragma once
#include <cstdint>
#include <functional>

#include "shardtrain/parallel/ddp.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/model/optim.hpp"

namespace shardtrain {

struct StepTiming {
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double comm_exposed_s = 0;  // time blocked waiting for gradient communication
};

struct StepResult {
  double loss_sum = 0;     // sum of the global batch's token losses (this rank's alone without a reducer)
  double grad_norm = 0;    // global gradient norm before clipping
  double clip_scale = 1;   // factor applied to the gradients (1 when not clipped)
  double lr = 0;           // learning rate used
  StepTiming timing;
};

class StepRunner {
 public:
  StepRunner(GptModel& model, const OptimizerConfig& optimizer);

  // Runs step `step` (0-based) over `micro_batches` micro-batches of `micro_batch` sequences
  // each, laid out one after another in `tokens` (micro_batches * micro_batch * (T+1) int32),
  // where every token's loss has weight 1/global_tokens.
  StepResult run(std::int64_t step, const std::int32_t* tokens, int micro_batches, int micro_batch,
                 double global_tokens);

  // Data parallelism: gradients go through `reducer` (which must outlive the runner); without
  // one, the step uses this rank's micro-batches alone.
  void set_reducer(GradientReducer* reducer);

  GptModel& model() { return model_; }
  AdamW& optimizer() { return optimizer_; }

 private:
  GptModel& model_;
  AdamW optimizer_;
  GradientReducer* reducer_ = nullptr;
};

}  // namespace shardtrain
