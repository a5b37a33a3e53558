#include "shardtrain/parallel/shard_layout.hpp"

#include "shardtrain/backend/backend.hpp"

namespace shardtrain {

ShardLayout::ShardLayout(const ParameterRegistry& registry, int world, int rank) {
  const std::size_t quantum = std::size_t(world) * Backend::kReductionChunk;
  for (const auto& u : registry.units()) {
    UnitShard s;
    s.begin = u.begin;
    s.end = u.end;
    s.padded = (u.size() + quantum - 1) / quantum * quantum;
    s.shard = s.padded / world;
    s.padded_offset = padded_total_;
    s.shard_offset = shard_total_;
    s.own_begin = std::min(u.end, u.begin + std::size_t(rank) * s.shard);
    s.own_end = std::min(u.end, s.own_begin + s.shard);
    padded_total_ += s.padded;
    shard_total_ += s.shard;
    max_padded_ = std::max(max_padded_, s.padded);
    units_.push_back(s);
  }
}

}  // namespace shardtrain
