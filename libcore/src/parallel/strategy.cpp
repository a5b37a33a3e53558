#include "shardtrain/parallel/strategy.hpp"

#include <vector>

#include "shardtrain/parallel/zero.hpp"

namespace shardtrain {

void TrainingStrategy::for_each_full_parameter(const std::function<void(const ParameterInfo&, const float*)>& fn) {
  with_full_model([&](GptModel& model) {
    // On the CPU the parameters are handed over where they lie; from a device, one tensor at a time.
    std::vector<float> tensor;
    for (const auto& t : model.registry().tensors())
      fn(t, model.backend().host_floats(model.params().data() + t.offset, t.numel, tensor));
  });
}

std::unique_ptr<TrainingStrategy> make_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                const OptimizerConfig& optimizer, const StrategyOptions& options) {
  if (options.zero_stage == 0) return make_ddp_strategy(backend, comm, model, optimizer, options);
  return make_zero_strategy(backend, comm, model, optimizer, options);
}

}  // namespace shardtrain
