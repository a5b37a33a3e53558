// Which pieces of the training state each rank owns in a parallel layout: the ONE definition the
// trainers' checkpoint writes (DDP and ZeRO strategies) and ckpt-reshard both use, so a resharded
// checkpoint's rank file r holds exactly what rank r of the target job would have written itself.
//
// The state is checkpoint_tensors(registry) (train_state.hpp): every parameter, then its first and
// second AdamW moments (kind 0, 1, 2), each a logical tensor. A piece is a flat element range of one
// of them.
//   zero_stage 0 (DDP, full replicas): ckpt::spread_ranges over the concatenated state: W equal
//     contiguous byte ranges, so the writing is spread and each element written once.
//   zero_stage 1, 2, 3: the rank's ZeRO shards (shard_layout.hpp: per unit, the r-th of W equal
//     slices of the unit padded to W x kReductionChunk), cut at tensor boundaries, for each kind.
//     The three stages own the same state ranges (they differ in what they keep between steps).
// Adding tensor parallelism (tp > 1): a TP rank holds slices of the TP-split matrices (a row or
// column block of each); its pieces are then those slices' flat ranges (a column block of an
// (out, in) matrix is `out` ranges), intersected with its data-parallel rank's share as above.
// OwnedPiece already allows several ranges per tensor; until that layout exists, tp > 1 is refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

class ShardLayout;

struct StateLayout {
  int world = 1;       // data-parallel ranks (= world size while tp == 1)
  int zero_stage = 0;  // 0 = DDP, 1, 2, 3
  int tp = 1;          // tensor-parallel degree: only 1 in this version
  // Throws UsageError naming the field: world < 1, zero_stage outside 0..3, tp != 1 ("tensor-parallel
  // layouts: not yet supported").
  void validate() const;
  std::string describe() const;  // "world 4, ZeRO-3" / "world 2, DDP"
};

// One owned piece: elements [offset, offset+count) of the flattened logical tensor `tensor` (an index
// into registry.tensors()) of state kind `kind` (0 parameters, 1 exp_avg, 2 exp_avg_sq: the
// checkpoint name is kStateTensorPrefixes[kind] + registry.tensors()[tensor].name). `unit`: the
// ZeRO sharding unit holding it (registry.units() index; 0 for DDP).
struct OwnedPiece {
  int kind = 0;
  std::size_t tensor = 0;
  std::size_t unit = 0;
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

// Rank `rank`'s pieces in `layout`, in checkpoint order (kind, then registry order). Over all ranks
// they cover every element of every state tensor exactly once. Pure: depends only on the registry,
// the layout and the rank. Throws UsageError for an invalid layout or rank.
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
