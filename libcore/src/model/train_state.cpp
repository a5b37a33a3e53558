#include "shardtrain/model/train_state.hpp"

#include "shardtrain/base/error.hpp"

namespace shardtrain {

std::vector<ckpt::TensorSpec> checkpoint_tensors(const ParameterRegistry& registry) {
  std::vector<ckpt::TensorSpec> specs;
  for (const char* prefix : kStateTensorPrefixes)
    for (const auto& t : registry.tensors()) specs.push_back({prefix + t.name, t.shape, ckpt::DType::kFloat32});
  return specs;
}

namespace {
// check_checkpoint_tensors for the registry's checkpoint_tensors `specs`.
void check_tensors(const ckpt::CheckpointReader& reader, const std::vector<ckpt::TensorSpec>& specs) {
  for (const auto& spec : specs) {
    const auto* info = reader.find(spec.name);
    if (!info)
      throw UsageError("checkpoint " + reader.folder() + " has no tensor '" + spec.name +
                       "': it was written by another model; start fresh or pick a matching checkpoint");
    if (info->spec.shape != spec.shape || info->spec.dtype != spec.dtype)
      throw UsageError("checkpoint " + reader.folder() + ": tensor '" + spec.name +
                       "' has another shape or type than this model's; start fresh or pick a matching checkpoint");
  }
}
}  // namespace

void check_checkpoint_tensors(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry) {
  check_tensors(reader, checkpoint_tensors(registry));
}

void restore_state(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry, const StateBuffers& state) {
  const auto specs = checkpoint_tensors(registry);
  check_tensors(reader, specs);
  std::size_t i = 0;
  for (float* base : {state.params, state.exp_avg, state.exp_avg_sq})
    for (const auto& t : registry.tensors()) reader.read(specs[i++].name, base + t.offset);
}

}  // namespace shardtrain
