#include "shardtrain/parallel/state_layout.hpp"

#include <algorithm>

#include "shardtrain/base/error.hpp"
#include "shardtrain/model/train_state.hpp"

namespace shardtrain {

void StateLayout::validate() const {
  if (world < 1) throw UsageError("layout: world size " + std::to_string(world) + " must be at least 1");
  if (zero_stage < 0 || zero_stage > 3)
    throw UsageError("layout: ZeRO stage " + std::to_string(zero_stage) + " must be 0 (DDP), 1, 2 or 3");
  if (tp < 1 || world % tp != 0)
    throw UsageError("layout: tensor-parallel degree " + std::to_string(tp) + " must be at least 1 and divide world size " +
                     std::to_string(world));
}

std::string StateLayout::describe() const {
  return "world " + std::to_string(world) + ", " + (zero_stage == 0 ? std::string("DDP") : "ZeRO-" + std::to_string(zero_stage)) +
         (tp > 1 ? ", tp " + std::to_string(tp) : "");
}

std::vector<OwnedPiece> owned_state_pieces(const ParameterRegistry& registry, const StateLayout& layout, int rank) {
  layout.validate();
  if (rank < 0 || rank >= layout.world)
    throw UsageError("layout: rank " + std::to_string(rank) + " is outside world size " + std::to_string(layout.world));
  const TensorParallelPlace& place = registry.place();
  const int tp_rank = rank % layout.tp, dp_rank = rank / layout.tp, dp = layout.dp();
  if (place.size != layout.tp || place.rank != tp_rank)
    throw UsageError("layout: rank " + std::to_string(rank) + " of " + layout.describe() + " holds TP shard " +
                     std::to_string(tp_rank) + " of " + std::to_string(layout.tp) + ", the registry given is shard " +
                     std::to_string(place.rank) + " of " + std::to_string(place.size));
  const auto& tensors = registry.tensors();
  std::vector<OwnedPiece> pieces;
  if (layout.zero_stage == 0 && layout.tp == 1) {
    const std::size_t n = tensors.size();
    for (const auto& r : ckpt::spread_ranges(checkpoint_tensors(registry), layout.world, rank)) {
      const std::size_t i = r.tensor % n;
      pieces.push_back({kCheckpointStateKinds[r.tensor / n], i, 0, r.offset, r.count, tensors[i].offset + std::size_t(r.offset)});
    }
    return pieces;
  }
  // The local flat range [lo, hi) of tensor i, as pieces of its logical runs.
  auto add_range = [&](StateKind kind, std::size_t unit, std::size_t i, std::size_t lo, std::size_t hi) {
    registry.for_each_logical_piece(lo, hi, [&](const ParameterInfo&, std::size_t local, std::size_t logical, std::size_t n) {
      pieces.push_back({kind, i, unit, std::int64_t(logical), std::int64_t(n), local});
    });
  };
  if (layout.zero_stage == 0) {  // DDP x TP: a share of each local tensor (replicas: of each copy)
    for (StateKind kind : kCheckpointStateKinds)
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        const ParameterInfo& t = tensors[i];
        const bool replicated = t.split == TpSplit::kReplicated;
        const std::size_t holders = std::size_t(dp) * (replicated ? std::size_t(layout.tp) : 1);
        const std::size_t part = replicated ? std::size_t(tp_rank) * std::size_t(dp) + std::size_t(dp_rank)
                                            : std::size_t(dp_rank);
        // Parts of the runs' elements counted in local order (padding is in no run).
        std::size_t held = 0;
        for (const auto& run : registry.runs(t)) held += run.count;
        const std::size_t lo = held * part / holders, hi = held * (part + 1) / holders;
        std::size_t at = 0;
        for (const auto& run : registry.runs(t)) {
          const std::size_t a = std::max(lo, at), b = std::min(hi, at + run.count);
          if (a < b) add_range(kind, 0, i, t.offset + run.local_offset + (a - at), t.offset + run.local_offset + (b - at));
          at += run.count;
        }
      }
    return pieces;
  }
  const ShardLayout shards(registry, dp, dp_rank);
  for (StateKind kind : kCheckpointStateKinds)
    for_each_owned_range(registry, shards, [&](std::size_t u, std::size_t i, std::size_t lo, std::size_t hi) {
      if (tensors[i].split == TpSplit::kReplicated && tp_rank != 0) return;  // TP rank 0 writes the replicas
      add_range(kind, u, i, lo, hi);
    });
  return pieces;
}

}  // namespace shardtrain
