#include "shardtrain/parallel/state_layout.hpp"

#include "shardtrain/base/error.hpp"
#include "shardtrain/model/train_state.hpp"

namespace shardtrain {

void StateLayout::validate() const {
  if (world < 1) throw UsageError("layout: world size " + std::to_string(world) + " must be at least 1");
  if (zero_stage < 0 || zero_stage > 3)
    throw UsageError("layout: ZeRO stage " + std::to_string(zero_stage) + " must be 0 (DDP), 1, 2 or 3");
  if (tp != 1)
    throw UsageError("layout: tensor-parallel layouts (tp " + std::to_string(tp) +
                     ") are not yet supported by owned_state_pieces; only tp 1 in this version");
}

std::string StateLayout::describe() const {
  return "world " + std::to_string(world) + ", " + (zero_stage == 0 ? std::string("DDP") : "ZeRO-" + std::to_string(zero_stage)) +
         (tp > 1 ? ", tp " + std::to_string(tp) : "");
}

std::vector<OwnedPiece> owned_state_pieces(const ParameterRegistry& registry, const StateLayout& layout, int rank) {
  layout.validate();
  if (rank < 0 || rank >= layout.world)
    throw UsageError("layout: rank " + std::to_string(rank) + " is outside world size " + std::to_string(layout.world));
  std::vector<OwnedPiece> pieces;
  const std::size_t n = registry.tensors().size();
  if (layout.zero_stage == 0) {
    for (const auto& r : ckpt::spread_ranges(checkpoint_tensors(registry), layout.world, rank))
      pieces.push_back({int(r.tensor / n), r.tensor % n, 0, r.offset, r.count});
    return pieces;
  }
  const ShardLayout shards(registry, layout.world, rank);
  for (int kind = 0; kind < 3; ++kind)
    for_each_owned_range(registry, shards, [&](std::size_t u, std::size_t i, std::size_t lo, std::size_t hi) {
      const std::size_t begin = registry.tensors()[i].offset;
      pieces.push_back({kind, i, u, std::int64_t(lo - begin), std::int64_t(hi - lo)});
    });
  return pieces;
}

}  // namespace shardtrain
