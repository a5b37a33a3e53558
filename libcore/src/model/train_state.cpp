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

void add_local_range_reads(const ParameterRegistry& registry, const std::string& prefix, std::size_t begin,
                           std::size_t end, float* out, std::vector<ckpt::ReadRequest>& reads) {
  std::fill(out, out + (end - begin), 0.0f);  // padding
  registry.for_each_logical_piece(begin, end, [&](const ParameterInfo& t, std::size_t local, std::size_t logical,
                                                  std::size_t n) {
    reads.push_back({prefix + t.name, std::int64_t(logical), std::int64_t(n), out + (local - begin)});
  });
}

void restore_state(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry, const StateBuffers& state) {
  const auto specs = checkpoint_tensors(registry);
  check_tensors(reader, specs);
  std::vector<ckpt::ReadRequest> reads;
  if (registry.place().split()) {
    std::size_t k = 0;
    for (float* base : {state.params, state.exp_avg, state.exp_avg_sq})
      add_local_range_reads(registry, kStateTensorPrefixes[k++], 0, registry.total(), base, reads);
  } else {
    std::size_t i = 0;
    for (float* base : {state.params, state.exp_avg, state.exp_avg_sq})
      for (const auto& t : registry.tensors()) {
        reads.push_back({specs[i].name, 0, specs[i].numel(), base + t.offset});
        ++i;
      }
  }
  reader.read_batch(reads);
}

}  // namespace shardtrain
