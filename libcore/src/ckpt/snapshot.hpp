// Internal: the host copy of this rank's part of a checkpoint that AsyncCheckpointWriter takes at a
// step boundary, so training may change its tensors while the copy is written in the background.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shardtrain/ckpt/format.hpp"

namespace shardtrain::ckpt::detail {

// std::allocator that leaves new elements uninitialised (no zero fill of a 1 GB snapshot buffer).
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using SnapshotArena = std::vector<unsigned char, UninitializedAllocator<unsigned char>>;

// A host copy of this rank's pieces, owning its bytes.
struct Snapshot {
  struct Piece {
    std::string tensor;
    std::int64_t offset = 0;
    std::int64_t count = 0;
    std::size_t at = 0;  // byte offset of the piece's data in `arena`
  };
  CheckpointManifest manifest;
  std::vector<TensorSpec> tensors;
  std::vector<Piece> pieces;
  SnapshotArena arena;    // all pieces' bytes, back to back
  double snapshot_s = 0;  // time take() spent copying: the training stall

  // Copies the pieces' data (count * dtype size bytes each) into `reuse` (the arena of an earlier
  // snapshot: already-mapped pages make the copy a plain memcpy) or a new arena. Throws UsageError
  // for a piece naming an unknown tensor.
  static Snapshot take(const CheckpointManifest& manifest, const std::vector<TensorSpec>& tensors,
                       const std::vector<PieceView>& pieces, SnapshotArena reuse);
  // The pieces as views into `arena`, for save_checkpoint.
  std::vector<PieceView> views() const;
};

}  // namespace shardtrain::ckpt::detail
