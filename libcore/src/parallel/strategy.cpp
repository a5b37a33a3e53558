#include "shardtrain/parallel/strategy.hpp"

#include <vector>

#include "shardtrain/parallel/zero.hpp"

namespace shardtrain {

void TrainingStrategy::for_each_full_parameter(const std::function<void(const ParameterInfo&, const float*)>& fn) {
  with_full_model([&](GptModel& model) {
    // On the CPU the parameters are host memory and are handed over where they lie; from a
    // device, one tensor at a time.
    const bool host = model.backend().device() == DeviceKind::kCpu;
    std::vector<float> tensor;
    for (const auto& t : model.registry().tensors()) {
      const float* values = model.params().data() + t.offset;
      if (!host) {
        tensor.resize(t.numel);
        model.params().download(tensor.data(), t.numel, t.offset);
        values = tensor.data();
      }
      fn(t, values);
    }
  });
}

std::unique_ptr<TrainingStrategy> make_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                const OptimizerConfig& optimizer, const StrategyOptions& options) {
  if (options.zero_stage == 0) return make_ddp_strategy(backend, comm, model, optimizer, options);
  return make_zero_strategy(backend, comm, model, optimizer, options);
}

}  // namespace shardtrain
