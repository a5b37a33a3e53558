// Which pieces of the training state each rank owns in a parallel layout: the ONE definition the
// trainers' checkpoint writes (DDP and ZeRO strategies, with or without tensor parallelism) and
// ckpt-reshard all use, so a resharded checkpoint's rank file r holds exactly what rank r of the
// target job would have written itself.
//
// The state is checkpoint_tensors(registry) (train_state.hpp): every parameter, then its first and
// second AdamW moments (kind 0, 1, 2), each a logical tensor. A piece is a flat element range of one
// of them. Ranks form the DP x TP mesh of train/job.hpp: TP ranks adjacent, so world rank
// r = dp_rank x tp + tp_rank, and TP rank t holds the local shards of ParameterRegistry(config, {tp, t}).
//   tp 1, zero_stage 0 (DDP, full replicas): ckpt::spread_ranges over the concatenated state: W
//     equal contiguous byte ranges, so the writing is spread and each element written once.
//   zero_stage 1, 2, 3: the rank's ZeRO shards of its local buffer (shard_layout.hpp: per unit, the
//     dp_rank-th of dp equal slices of the unit padded to dp x kReductionChunk), mapped onto the
//     logical tensors (a TP shard is one or more logical runs: parameters.hpp), for each kind. The
//     three stages own the same state ranges (they differ in what they keep between steps). Under
//     TP a replicated tensor (LayerNorms, wpe, biases of row-parallel layers) is written by TP rank 0.
//   tp > 1, zero_stage 0 (DDP x TP): each local tensor's logical runs, cut into dp equal parts
//     (part dp_rank); a replicated tensor is held by all dp x tp ranks and cut into dp x tp parts
//     (part tp_rank x dp + dp_rank), so every rank writes a share.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/model/parameters.hpp"
#include "shardtrain/model/train_state.hpp"

namespace shardtrain {

class ShardLayout;

struct StateLayout {
  int world = 1;       // ranks in all (= dp x tp): the number of rank files
  int zero_stage = 0;  // 0 = DDP, 1, 2, 3
  int tp = 1;          // tensor-parallel degree
  int dp() const { return tp > 0 ? world / tp : 0; }
  // Throws UsageError naming the field: world < 1, zero_stage outside 0..3, tp < 1 or not dividing
  // world. (Whether a model can be split tp ways is validate_tensor_parallel's question.)
  void validate() const;
  std::string describe() const;  // "world 4, ZeRO-3" / "world 2, DDP" / "world 4, ZeRO-1, tp 2"
};

// One owned piece: elements [offset, offset+count) of the flattened logical tensor `tensor` (an index
// into registry.tensors(), the same at every TP place) of the checkpointed state kind `kind`
// (train_state.hpp: the checkpoint name is state_tensor_prefix(kind) + registry.tensors()[tensor].name).
// `local`: the flat index of its first element in the rank's local buffer (the registry's flat
// order; the elements are contiguous there too). `unit`: the ZeRO sharding unit holding it
// (registry.units() index; 0 for DDP).
struct OwnedPiece {
  StateKind kind = StateKind::kParameters;
  std::size_t tensor = 0;
  std::size_t unit = 0;
  std::int64_t offset = 0;
  std::int64_t count = 0;
  std::size_t local = 0;
};

// World rank `rank`'s pieces in `layout`, in checkpoint order (kind, then registry order). Over all
// ranks they cover every element of every state tensor exactly once. `registry` is the rank's own:
// its place must be {layout.tp, rank % layout.tp} (at tp 1 the unsplit registry). Pure: depends only
// on the registry, the layout and the rank. Throws UsageError for an invalid layout, a rank outside
// it or a registry of another place.
std::vector<OwnedPiece> owned_state_pieces(const ParameterRegistry& registry, const StateLayout& layout, int rank);

// The ZeRO part of the above for one kind: fn(unit, tensor index, lo, hi) for each intersection
// [lo, hi) (flat registry indices) of a tensor with the rank's shard of a unit, in registry order.
// The ZeRO strategy walks its shards with this too (initialisation, restore, checkpoint pieces).
template <typename Fn>
void for_each_owned_range(const ParameterRegistry& registry, const ShardLayout& layout, Fn&& fn);

}  // namespace shardtrain

#include "shardtrain/parallel/shard_layout.hpp"

namespace shardtrain {

template <typename Fn>
void for_each_owned_range(const ParameterRegistry& registry, const ShardLayout& layout, Fn&& fn) {
  const auto& units = layout.units();
  std::size_t u = 0;
  const auto& tensors = registry.tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const ParameterInfo& t = tensors[i];
    while (t.offset >= units[u].end) ++u;
    const std::size_t lo = std::max(t.offset, units[u].own_begin), hi = std::min(t.offset + t.numel, units[u].own_end);
    if (lo < hi) fn(u, i, lo, hi);
  }
}

}  // namespace shardtrain
