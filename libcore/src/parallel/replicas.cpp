#include "shardtrain/parallel/replicas.hpp"

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"

namespace shardtrain {

std::vector<std::uint64_t> tensor_hashes(const ParameterRegistry& registry, const std::vector<float>& flat) {
  if (flat.size() != registry.total())
    throw Error(ExitCode::kInternal, "replica check: " + std::to_string(flat.size()) + " parameters given, the model has " +
                                         std::to_string(registry.total()));
  std::vector<std::uint64_t> out;
  for (const auto& t : registry.tensors()) out.push_back(fnv1a64_bytes(flat.data() + t.offset, t.numel * sizeof(float)));
  return out;
}

void check_replicas(Communicator& comm, const ParameterRegistry& registry, const std::vector<float>& flat,
                    std::int64_t step) {
  const auto mine = tensor_hashes(registry, flat);
  const std::size_t k = mine.size();
  std::vector<std::uint64_t> all(k * std::size_t(comm.size()));
  comm.all_gather(mine.data(), all.data(), k);
  for (int r = 1; r < comm.size(); ++r)
    for (std::size_t t = 0; t < k; ++t)
      if (all[std::size_t(r) * k + t] != all[t])
        throw Error(ExitCode::kFailure, "replica check at step " + std::to_string(step) + ": rank " + std::to_string(r) +
                                            " differs from rank 0 in tensor " + registry.tensors()[t].name +
                                            " (replicas diverged; check determinism of the kernels and the all-reduce)");
}

}  // namespace shardtrain
