// Tensor-parallel helpers of the strategies (the split model itself is gpt.hpp, the local layout
// parameters.hpp): assembling the unsplit model from the TP shards, and the replica check along
// the TP axis.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/model/gpt.hpp"

namespace shardtrain {

// Collective over `local`'s TP group: every rank's local parameters are gathered and, on TP rank
// 0, scattered into the logical tensors of an unsplit GptModel (max_batch `micro_batch`) on the
// same backend, which is returned; the other ranks get nullptr. Transient memory on every rank of
// the group: the T local parameter vectors (the whole model once).
std::unique_ptr<GptModel> gather_tensor_parallel_model(GptModel& local, int micro_batch);
// The same from this rank's local parameter vector (host, its registry order), for a layout that
// holds no local model of its own (ZeRO assembles the vector from its shards).
std::unique_ptr<GptModel> gather_tensor_parallel_model(Communicator& tp, Backend& backend, const ModelConfig& config,
                                                       const std::vector<float>& local_params, int micro_batch);

// The logical flat parameters (the unsplit registry's order) from the T ranks' local vectors
// `every` (rank r's at r * local_total), for `config` split over T.
std::vector<float> logical_from_tensor_parallel(const ModelConfig& config, int tp, const std::vector<float>& every);

// Collective over the TP group: the replicated tensors (LayerNorms, wpe, the row-parallel biases)
// must be bitwise equal on every TP rank. Throws Error(kFailure) "replica check at step S: TP rank
// R differs from TP rank 0 in tensor NAME" on the first mismatch.
void check_tensor_parallel_replicas(Communicator& tp, const ParameterRegistry& registry,
                                    const std::vector<float>& flat_params, std::int64_t step);

}  // namespace shardtrain
