#include "shardtrain/parallel/tensor_parallel.hpp"

#include <algorithm>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"

namespace shardtrain {

std::vector<float> logical_from_tensor_parallel(const ModelConfig& config, int tp, const std::vector<float>& every) {
  const ParameterRegistry full(config);
  std::vector<float> flat(full.total(), 0.0f);
  for (int r = 0; r < tp; ++r) {
    const ParameterRegistry local(config, {tp, r});
    const float* mine = every.data() + std::size_t(r) * local.total();
    for (std::size_t i = 0; i < local.tensors().size(); ++i) {
      const ParameterInfo& t = local.tensors()[i];
      for (const LogicalRun& run : local.runs(t))
        std::copy(mine + t.offset + run.local_offset, mine + t.offset + run.local_offset + run.count,
                  flat.begin() + std::ptrdiff_t(full.tensors()[i].offset + run.logical_offset));
    }
  }
  return flat;
}

std::unique_ptr<GptModel> gather_tensor_parallel_model(Communicator& tp, Backend& backend, const ModelConfig& config,
                                                       const std::vector<float>& local_params, int micro_batch) {
  std::vector<float> every(local_params.size() * std::size_t(tp.size()));
  tp.all_gather(local_params.data(), every.data(), local_params.size());
  if (tp.rank() != 0) return nullptr;
  auto full = std::make_unique<GptModel>(backend, config, micro_batch);
  full->set_parameters(logical_from_tensor_parallel(config, tp.size(), every));
  return full;
}

std::unique_ptr<GptModel> gather_tensor_parallel_model(GptModel& local, int micro_batch) {
  Communicator* tp = local.tensor_parallel_comm();
  if (!tp) throw Error(ExitCode::kInternal, "gather_tensor_parallel_model on an unsplit model");
  return gather_tensor_parallel_model(*tp, local.backend(), local.config(), local.download_parameters(), micro_batch);
}

void check_tensor_parallel_replicas(Communicator& tp, const ParameterRegistry& registry,
                                    const std::vector<float>& flat, std::int64_t step) {
  std::vector<std::uint64_t> mine;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < registry.tensors().size(); ++i) {
    const auto& t = registry.tensors()[i];
    if (t.split != TpSplit::kReplicated) continue;
    mine.push_back(fnv1a64_bytes(flat.data() + t.offset, t.numel * sizeof(float)));
    which.push_back(i);
  }
  const std::size_t k = mine.size();
  std::vector<std::uint64_t> all(k * std::size_t(tp.size()));
  tp.all_gather(mine.data(), all.data(), k);
  for (int r = 1; r < tp.size(); ++r)
    for (std::size_t j = 0; j < k; ++j)
      if (all[std::size_t(r) * k + j] != all[j])
        throw Error(ExitCode::kFailure, "replica check at step " + std::to_string(step) + ": TP rank " +
                                            std::to_string(r) + " differs from TP rank 0 in replicated tensor " +
                                            registry.tensors()[which[j]].name +
                                            " (the TP all-reduces must give every rank the same sums)");
}

}  // namespace shardtrain
