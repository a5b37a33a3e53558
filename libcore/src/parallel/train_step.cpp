#include "shardtrain/parallel/train_step.hpp"

#include "micro_batch_loop.hpp"

namespace shardtrain {
namespace {

// The flat-buffer layout: gradients accumulate in the model's flat buffer; with a reducer they
// are reduced across the data-parallel ranks (ddp.hpp), without one the step is this rank's.
class FlatStepHooks final : public StepHooks {
 public:
  FlatStepHooks(GptModel& model, AdamW& optimizer, GradientReducer* reducer)
      : model_(model), optimizer_(optimizer), reducer_(reducer) {}

  void begin_step() override {
    if (reducer_) reducer_->start_step();
    else model_.zero_grads();
  }
  void before_backward(int micro_batch) override {
    if (reducer_) reducer_->before_backward(micro_batch);
  }
  void after_backward(int micro_batch) override {
    if (reducer_) reducer_->after_backward(micro_batch);
  }
  double finish_reduction(const std::vector<double>& micro_batch_loss_sums) override {
    if (reducer_) return reducer_->finish(micro_batch_loss_sums);
    double sum = 0.0;  // this rank's step alone
    for (double x : micro_batch_loss_sums) sum += x;
    return sum;
  }
  double gradient_norm_squared() override {
    if (Communicator* tp = model_.tensor_parallel_comm())
      return tensor_parallel_grad_norm_squared(model_.backend(), model_.registry(), model_.grads().data(), *tp);
    return grad_norm_squared(model_.backend(), model_.registry(), model_.grads().data());
  }
  void scale_gradients(float factor) override {
    model_.backend().scale(model_.grads().data(), model_.grads().size(), factor);
  }
  void apply_update(std::int64_t step, double lr) override {
    optimizer_.update(model_.params().data(), model_.grads().data(), step, lr);
  }
  double exposed_seconds() const override { return reducer_ ? reducer_->exposed_seconds() : 0.0; }

 private:
  GptModel& model_;
  AdamW& optimizer_;
  GradientReducer* reducer_;
};

}  // namespace

StepRunner::StepRunner(GptModel& model, const OptimizerConfig& optimizer)
    : model_(model), optimizer_(model.backend(), model.registry(), optimizer) {}

void StepRunner::set_reducer(GradientReducer* reducer) {
  reducer_ = reducer;
  if (reducer)
    model_.set_gradient_ready_hook([reducer](std::size_t ready_from) { reducer->gradient_ready(ready_from); });
  else
    model_.set_gradient_ready_hook(nullptr);
}

StepResult StepRunner::run(std::int64_t step, const std::int32_t* tokens, int micro_batches, int micro_batch,
                           double global_tokens) {
  FlatStepHooks hooks(model_, optimizer_, reducer_);
  return run_micro_batch_step(model_, hooks, optimizer_.config(), step, tokens, micro_batches, micro_batch,
                              global_tokens);
}

}  // namespace shardtrain
