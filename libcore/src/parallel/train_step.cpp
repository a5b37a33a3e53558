#include "shardtrain/parallel/train_step.hpp"

#include <chrono>
#include <cmath>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

StepRunner::StepRunner(GptModel& model, const OptimizerConfig& optimizer)
    : model_(model), optimizer_(model.backend(), model.registry(), optimizer) {}

void require_finite(std::int64_t step, double loss_sum, double grad_norm) {
  if (!std::isfinite(grad_norm) || !std::isfinite(loss_sum))
    throw NumericalError("step " + std::to_string(step) + ": non-finite " +
                         (std::isfinite(loss_sum) ? "gradient norm" : "loss") + "; lower --lr or check the data");
}

void StepRunner::set_reducer(GradientReducer* reducer) {
  reducer_ = reducer;
  if (reducer)
    model_.set_gradient_ready_hook([reducer](std::size_t ready_from) { reducer->gradient_ready(ready_from); });
  else
    model_.set_gradient_ready_hook(nullptr);
}

StepResult StepRunner::run(std::int64_t step, const std::int32_t* tokens, int micro_batches, int micro_batch,
                           double global_tokens) {
  StepResult r;
  Backend& be = model_.backend();
  const std::size_t seq = std::size_t(model_.config().seq_len) + 1;
  const float dloss_scale = float(1.0 / global_tokens);
  if (reducer_) reducer_->start_step();
  else model_.zero_grads();
  for (int m = 0; m < micro_batches; ++m) {
    const std::int32_t* mb = tokens + std::size_t(m) * micro_batch * seq;
    auto t0 = std::chrono::steady_clock::now();
    model_.forward(mb, micro_batch);
    const double loss_sum = model_.loss(mb, dloss_scale);
    be.synchronize();
    r.timing.forward_s += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    if (reducer_) reducer_->before_backward(m);
    model_.backward();
    be.synchronize();
    if (reducer_) reducer_->after_backward(m, loss_sum);
    else r.loss_sum += loss_sum;
    r.timing.backward_s += seconds_since(t0);
  }
  if (reducer_) {
    r.loss_sum = reducer_->finish();
    r.timing.comm_exposed_s = reducer_->exposed_seconds();
  }
  auto t0 = std::chrono::steady_clock::now();
  float* grads = model_.grads().data();
  const std::size_t n = model_.grads().size();
  r.grad_norm = std::sqrt(grad_norm_squared(be, model_.registry(), grads));
  require_finite(step, r.loss_sum, r.grad_norm);
  r.clip_scale = clip_factor(r.grad_norm, optimizer_.config().grad_clip);
  if (r.clip_scale != 1.0) be.scale(grads, n, float(r.clip_scale));
  r.lr = learning_rate(optimizer_.config(), step);
  optimizer_.update(model_.params().data(), grads, step, r.lr);
  be.synchronize();
  r.timing.optimizer_s = seconds_since(t0);
  return r;
}

}  // namespace shardtrain
