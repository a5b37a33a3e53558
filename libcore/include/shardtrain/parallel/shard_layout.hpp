// Sharded layout of the model state (ZeRO, zero.hpp): per sharding unit (ParameterRegistry::
// units()), the unit's flat range padded with zeros to a multiple of W x Backend::kReductionChunk;
// rank r owns the r-th of W equal slices, so every shard starts at a reduction-chunk boundary of
// its unit (the layout-independent norm of contract 2 of docs/ARCHITECTURE.md).
#pragma once
#include <cstddef>
#include <vector>

#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

// One unit's place in the sharded layout of one rank.
struct UnitShard {
  std::size_t begin = 0, end = 0;   // the unit's flat range in the registry layout
  std::size_t padded = 0;           // padded length: a multiple of world x kReductionChunk
  std::size_t shard = 0;            // padded / world
  std::size_t padded_offset = 0;    // offset of the unit in a padded full buffer
  std::size_t shard_offset = 0;     // offset of this rank's slice in its flat shard buffer
  // This rank's owned flat range (registry indices), clipped to the unit: [own_begin, own_end).
  std::size_t own_begin = 0, own_end = 0;
  std::size_t size() const { return end - begin; }
};

class ShardLayout {
 public:
  ShardLayout(const ParameterRegistry& registry, int world, int rank);
  const std::vector<UnitShard>& units() const { return units_; }
  std::size_t shard_total() const { return shard_total_; }    // floats per rank per sharded buffer
  std::size_t padded_total() const { return padded_total_; }  // floats of a padded full buffer
  std::size_t max_padded() const { return max_padded_; }

 private:
  std::vector<UnitShard> units_;
  std::size_t shard_total_ = 0, padded_total_ = 0, max_padded_ = 0;
};

}  // namespace shardtrain
