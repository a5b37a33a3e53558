#include "snapshot.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "internal.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"

namespace shardtrain::ckpt::detail {

Snapshot Snapshot::take(const CheckpointManifest& manifest, const std::vector<TensorSpec>& tensors,
                        const std::vector<PieceView>& pieces, SnapshotArena reuse) {
  const Stopwatch watch;
  std::map<std::string, DType> dtypes;
  for (const auto& t : tensors) dtypes[t.name] = t.dtype;
  Snapshot s;
  s.manifest = manifest;
  s.tensors = tensors;
  s.pieces.reserve(pieces.size());
  std::size_t total = 0;
  for (const auto& p : pieces) {
    auto it = dtypes.find(p.tensor);
    if (it == dtypes.end())
      throw UsageError("checkpoint snapshot: piece of '" + p.tensor + "', which is not in the tensor list");
    s.pieces.push_back({p.tensor, p.offset, p.count, total});
    total += std::size_t(p.count) * dtype_size(it->second);
  }
  s.arena = std::move(reuse);
  s.arena.resize(total);
  // Two threads for the copy: the snapshot is the training stall, and one core does not saturate memory.
  auto copy_range = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const std::size_t a = s.pieces[i].at;
      const std::size_t b = (i + 1 < pieces.size() ? s.pieces[i + 1].at : total);
      const std::size_t lo = std::max(a, begin), hi = std::min(b, end);
      if (lo < hi) std::memcpy(s.arena.data() + lo, static_cast<const unsigned char*>(pieces[i].data) + (lo - a), hi - lo);
    }
  };
  if (total >= (64u << 20)) {
    std::thread helper(copy_range, total / 2, total);
    copy_range(0, total / 2);
    helper.join();
  } else {
    copy_range(0, total);
  }
  s.snapshot_s = watch.seconds();
  return s;
}

std::vector<PieceView> Snapshot::views() const {
  std::vector<PieceView> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) out.push_back({p.tensor, p.offset, p.count, arena.data() + p.at});
  return out;
}

}  // namespace shardtrain::ckpt::detail
