// The training state in a checkpoint (contract 5 of docs/ARCHITECTURE.md): which logical tensors hold it, how data-
// parallel replicas spread the writing, and how a resume restores it.
//
// Tensors, in registry order: every parameter `<name>`, then `optim.exp_avg.<name>`, then
// `optim.exp_avg_sq.<name>`, each with its logical shape (contract 3). Which rank writes which
// pieces of them in a layout (DDP or a ZeRO stage): parallel/state_layout.hpp, owned_state_pieces.
// The rest of the state (step, tokens seen, sampler (epoch, consumed), LR schedule position, RNG
// description, data snapshot and cutoff, configs, layout) is the manifest (ckpt_format.hpp).
#pragma once
#include <vector>

#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

// The three host-addressable flat buffers of the state (registry.total() floats each).
struct StateBuffers {
  float* params = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
};

// The kinds of per-parameter state a layout places: the three a checkpoint holds, in checkpoint
// order (parameters, first and second AdamW moments; their values index kStateTensorPrefixes),
// then the gradients, which live only within a step. A layout plan lists the kinds it shards
// over the data-parallel ranks (parallel/layout_plan.hpp); the ZeRO strategy keeps the others whole.
enum class StateKind { kParameters = 0, kExpAvg = 1, kExpAvgSq = 2, kGradients = 3 };
inline constexpr StateKind kCheckpointStateKinds[] = {StateKind::kParameters, StateKind::kExpAvg, StateKind::kExpAvgSq};

// Name prefixes of the three checkpointed kinds, in checkpoint order ("optim.exp_avg.<name>").
inline constexpr const char* kStateTensorPrefixes[] = {"", "optim.exp_avg.", "optim.exp_avg_sq."};
// The prefix of a checkpointed kind (not kGradients).
inline const char* state_tensor_prefix(StateKind kind) { return kStateTensorPrefixes[int(kind)]; }

std::vector<ckpt::TensorSpec> checkpoint_tensors(const ParameterRegistry& registry);

// Adds to `reads` what fills the elements [begin, end) of the registry's LOCAL flat buffer `out` of
// state part `prefix` (kStateTensorPrefixes) from a checkpoint of any layout: each local element
// gets the logical element it stands for (one request per run of them); padding elements are set
// to 0 here. For CheckpointReader::read_batch, which reads a whole restore's requests in one pass.
void add_local_range_reads(const ParameterRegistry& registry, const std::string& prefix, std::size_t begin,
                           std::size_t end, float* out, std::vector<ckpt::ReadRequest>& reads);

// Throws UsageError naming the checkpoint and tensor when a tensor of the state is missing or has
// another shape or type (a checkpoint of another model).
void check_checkpoint_tensors(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry);

// Reads every tensor of the state (whole: checksums verified; under TP this rank's shards) into the
// buffers, in one CheckpointReader::read_batch. Throws UsageError naming the checkpoint and tensor
// when one is missing or has another shape.
void restore_state(const ckpt::CheckpointReader& reader, const ParameterRegistry& registry, const StateBuffers& state);

}  // namespace shardtrain
