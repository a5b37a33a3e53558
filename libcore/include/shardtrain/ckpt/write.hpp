// Writing checkpoints: the collective synchronous save and the background (async) writer.
//
// Commit protocol of save_checkpoint (collective over `comm`; rank 0 of `comm` coordinates):
//   1. rank 0 checks the free space (SaveOptions), removes a stale <dir>/step_N.tmp (an interrupted
//      save) and creates it empty;
//      broadcast of the outcome (so a failure there fails every rank, none hangs).
//   2. every rank writes step_N.tmp/rank_<R>.h5 with its pieces, closes it, then fsyncs it while it
//      computes its SHA-256 (re-read from the page cache) and the per-piece checksums (overlapped).
//   3. gather of (file record, piece table, error) to rank 0.
//   4. rank 0, if every rank succeeded and the pieces cover every tensor exactly once: writes
//      index.h5 (manifest + virtual datasets), fsyncs it and the folder, renames step_N.tmp ->
//      step_N (an existing step_N is moved aside first and removed after), fsyncs <dir>, then
//      replaces `latest` (latest.tmp, fsync, rename, fsync <dir>).
//      On any failure it removes step_N.tmp (frees the space) and leaves everything else as it was.
//   5. broadcast of the outcome: every rank returns, or every rank throws the same error
//      (IoError for file-system failures such as a full disk; UsageError for bad pieces/names).
//   6. rank 0 prunes if options.keep > 0 (a pruning problem is logged, never thrown).
// A crash anywhere before the rename leaves only step_N.tmp, which readers never look at; the
// previous checkpoint and `latest` are untouched until the new one is complete and durable.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "shardtrain/ckpt/format.hpp"

namespace shardtrain::ckpt {

struct SaveOptions {
  bool update_latest = true;  // replace <dir>/latest after the commit
  int keep = 0;               // > 0: after the commit rank 0 prunes to the newest `keep` (ckpt_commit.hpp)
  // Rank 0 refuses to start (IoError, nothing written) when statvfs(ckpt_dir) shows less free space
  // than the checkpoint's tensor bytes plus 1 MiB. Turn off on file systems that report no free
  // space figure (some FUSE mounts report 0). Pruning runs after the commit, so --keep K needs room
  // for K+1 checkpoints.
  bool check_free_space = true;
};

// Timings in seconds; bytes of this rank's file and of the whole checkpoint (all files + index).
struct SaveResult {
  std::string path;            // the committed folder
  std::int64_t step = 0;
  std::int64_t bytes_local = 0;
  std::int64_t bytes_total = 0;
  double write_s = 0;          // this rank: HDF5 create + write + close (to the page cache)
  double sync_s = 0;           // this rank: fsync overlapped with SHA-256 and piece checksums
  double commit_s = 0;         // gather, index, renames (rank 0), waiting for rank 0 (others)
  double total_s = 0;          // whole collective call on this rank
  double snapshot_s = 0;       // async only: the host copy (the training stall), else 0
  double wait_s = 0;           // async only: time save() waited for the previous save
};

// Collective over `comm` (every rank calls it with the same dir, manifest and tensor list; each with
// its own pieces). `tensors` lists every logical tensor of the checkpoint; the pieces of all ranks
// together must cover each tensor exactly once (spread_pieces does this for replicated state).
// Writes <ckpt_dir>/step_<manifest.step>/ and returns once it is committed on every rank.
// Throws IoError (naming the file and what to do) or UsageError on every rank when any rank failed.
SaveResult save_checkpoint(const std::string& ckpt_dir, const CheckpointManifest& manifest,
                           const std::vector<TensorSpec>& tensors, const std::vector<PieceView>& pieces,
                           MPI_Comm comm, const SaveOptions& options = {});

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

// Background checkpoint writer: save() returns once the previous save has finished and this rank's
// pieces are copied to host memory (a snapshot), and the new save runs save_checkpoint on a worker
// thread over a private duplicate of `comm` (so its collectives never interleave with the training
// collectives). That needs MPI_THREAD_MULTIPLE; when MPI provides less, the writer says so once in
// the log and saves synchronously inside save() (same results).
//
// The trainer, on every rank: at a save step, `stall = writer.save(manifest, tensors, pieces)`;
// every step `if (auto r = writer.poll()) log(*r)` (poll() rethrows a failed background save, so
// the job fails loudly at the next step); before exiting `writer.wait()`.
// Construction and destruction are collective over `comm` (MPI_Comm_dup / MPI_Comm_free); destroy
// the writer before MPI_Finalize. The destructor waits and logs (never throws) a pending failure.
class AsyncCheckpointWriter {
 public:
  AsyncCheckpointWriter(std::string ckpt_dir, MPI_Comm comm, SaveOptions options = {});
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Waits for the previous save (rethrowing its failure), copies the pieces' data (a snapshot; a
  // piece naming an unknown tensor: UsageError), then starts writing it. Returns the training stall:
  // the seconds this call held the caller (wait + copy; the whole save in the synchronous fallback).
  double save(const CheckpointManifest& manifest, const std::vector<TensorSpec>& tensors,
              const std::vector<PieceView>& pieces);
  // Allocates and pre-faults the snapshot buffer for `bytes` (this rank's pieces) now, at start-up,
  // so the first save's stall is a plain copy instead of also mapping fresh pages (measured
  // 0.7-0.85 s for 0.5 GB per rank). Optional; a later, larger save grows the buffer.
  void reserve(std::size_t bytes);
  // Non-blocking. When the background save has finished: returns its result once (with snapshot_s
  // and wait_s filled), or rethrows its error once. Otherwise nullopt.
  std::optional<SaveResult> poll();
  // Blocks until the background save (if any) has finished; returns its result or rethrows its error.
  std::optional<SaveResult> wait();
  bool busy() const;             // a save is in flight or its result has not been collected
  bool asynchronous() const { return async_; }

 private:
  struct Snapshot;  // a host copy of this rank's pieces, owning its bytes (ckpt_write.cpp)
  std::string dir_;
  SaveOptions options_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool async_ = false;
  std::thread worker_;
  std::future<SaveResult> pending_;
  std::optional<SaveResult> sync_result_;  // synchronous fallback: result waiting for poll()
  SnapshotArena spare_;                     // the last snapshot's buffer, reused by the next save()
  double wait_previous();  // waits for the in-flight save, rethrows its failure; returns seconds waited
  void start(Snapshot snapshot, double wait_s);
  std::optional<SaveResult> collect();
};

}  // namespace shardtrain::ckpt
