#include "shardtrain/model/train_state.hpp"

#include <algorithm>

#include "shardtrain/base/error.hpp"

namespace shardtrain {

std::vector<ckpt::TensorSpec> checkpoint_tensors(const ParameterRegistry& registry) {
  std::vector<ckpt::TensorSpec> specs;
  for (const char* prefix : kStateTensorPrefixes)
    for (const auto& t : registry.tensors()) specs.push_back({prefix + t.name, t.logical_shape, ckpt::DType::kFloat32});
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

void read_local_range(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry,
                      const std::string& prefix, std::size_t begin, std::size_t end, float* out) {
  for (std::size_t i = begin; i < end; ++i) out[i - begin] = 0.0f;  // padding
  // A row-parallel weight is a run per row: read it whole once, then slice.
  std::vector<float> whole;
  const ParameterInfo* whole_of = nullptr;
  registry.for_each_logical_piece(begin, end, [&](const ParameterInfo& t, std::size_t local, std::size_t logical,
                                                  std::size_t n) {
    const std::string name = prefix + t.name;
    if (t.split != TpSplit::kColumns) {
      reader.read_range(name, std::int64_t(logical), std::int64_t(n), out + (local - begin));
      return;
    }
    if (whole_of != &t) {
      whole.resize(t.logical_numel());
      reader.read(name, whole.data());
      whole_of = &t;
    }
    std::copy(whole.begin() + std::ptrdiff_t(logical), whole.begin() + std::ptrdiff_t(logical + n), out + (local - begin));
  });
}

void restore_state(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry, const StateBuffers& state) {
  const auto specs = checkpoint_tensors(registry);
  check_tensors(reader, specs);
  if (registry.place().split()) {
    std::size_t k = 0;
    for (float* base : {state.params, state.exp_avg, state.exp_avg_sq})
      read_local_range(reader, registry, kStateTensorPrefixes[k++], 0, registry.total(), base);
    return;
  }
  std::size_t i = 0;
  for (float* base : {state.params, state.exp_avg, state.exp_avg_sq})
    for (const auto& t : registry.tensors()) reader.read(specs[i++].name, base + t.offset);
}

}  // namespace shardtrain
