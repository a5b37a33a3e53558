// Replica check for data parallelism: every rank must hold bitwise the same parameters after each
// step. A hash per tensor is gathered from all ranks (a small all-gather) and compared with rank
// 0's; the first diverging (rank, tensor) is named and the job stops.
#pragma once
#include <cstdint>
#include <vector>

#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

// FNV-1a 64 of each tensor's bytes, in registry order.
std::vector<std::uint64_t> tensor_hashes(const ParameterRegistry& registry, const std::vector<float>& flat_params);

// Collective over `comm`. Throws Error(kFailure) "replica check at step S: rank R differs from
// rank 0 in tensor NAME" on the first mismatch (lowest rank, then registry order), on every rank.
void check_replicas(Communicator& comm, const ParameterRegistry& registry, const std::vector<float>& flat_params,
                    std::int64_t step);

}  // namespace shardtrain
