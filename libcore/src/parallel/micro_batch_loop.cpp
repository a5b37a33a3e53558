#include "micro_batch_loop.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/phase.hpp"

namespace shardtrain {
namespace {

// Every layout refuses a non-finite loss or gradient norm before clipping and updating, naming
// the step.
void require_finite(std::int64_t step, double loss_sum, double grad_norm) {
  if (!std::isfinite(grad_norm) || !std::isfinite(loss_sum))
    throw NumericalError("step " + std::to_string(step) + ": non-finite " +
                         (std::isfinite(loss_sum) ? "gradient norm" : "loss") + "; lower --lr or check the data");
}

}  // namespace

StepResult run_micro_batch_step(GptModel& model, StepHooks& hooks, const OptimizerConfig& optimizer,
                                std::int64_t step, const std::int32_t* tokens,
                                int micro_batches, int micro_batch, double global_tokens) {
  StepResult r;
  Backend& backend = model.backend();
  const std::size_t seq = std::size_t(model.config().seq_len) + 1;
  const float dloss_scale = float(1.0 / global_tokens);
  hooks.begin_step();
  std::vector<double> loss_sums;  // per micro-batch, in local order
  loss_sums.reserve(std::size_t(micro_batches));
  Stopwatch watch;
  try {  // deterministic mode's exact sum refuses a NaN or Inf gradient naming the element: add the step
    for (int m = 0; m < micro_batches; ++m) {
      watch.restart();
      set_phase(Phase::kForward);  // stamped on the flight records of the collectives below (ZeRO's gathers)
      model.forward(tokens + std::size_t(m) * micro_batch * seq, micro_batch);
      const double loss_sum = model.loss(dloss_scale);
      backend.synchronize();
      r.timing.forward_s += watch.lap();
      set_phase(Phase::kBackward);
      hooks.before_backward(m);
      model.backward();
      backend.synchronize();
      hooks.after_backward(m);
      r.timing.backward_s += watch.lap();
      loss_sums.push_back(loss_sum);
    }
    r.loss_sum = hooks.finish_reduction(loss_sums);
  } catch (const NumericalError& e) {
    throw NumericalError("step " + std::to_string(step) + ": " + e.what());
  }

  watch.restart();
  set_phase(Phase::kOptimizer);
  r.grad_norm = std::sqrt(hooks.gradient_norm_squared());
  require_finite(step, r.loss_sum, r.grad_norm);
  r.clip_scale = clip_factor(r.grad_norm, optimizer.grad_clip);
  if (r.clip_scale != 1.0) hooks.scale_gradients(float(r.clip_scale));
  r.lr = learning_rate(optimizer, step);
  hooks.apply_update(step, r.lr);
  backend.synchronize();
  hooks.share_updated_parameters();
  r.timing.optimizer_s = watch.seconds();
  r.timing.comm_exposed_s = hooks.exposed_seconds();
  return r;
}

}  // namespace shardtrain
