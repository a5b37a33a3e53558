// Writing checkpoints: the collective synchronous save and the background (async) writer.
//
// Commit protocol of save_checkpoint (collective over `comm`; rank 0 of `comm` coordinates):
//   1. rank 0 checks the free space (SaveOptions), removes a stale <dir>/step_N.tmp (an interrupted
//      save) and creates it empty;
//      broadcast of the outcome (so a failure there fails every rank, none hangs).
//   2. every rank writes step_N.tmp/rank_<R>.h5 with its pieces, closes it, then fsyncs it while it
//      computes its SHA-256 (re-read from the page cache) and the per-piece checksums (overlapped).
//   3. all-gather of (file record, piece table, error); rank 0 uses them.
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
//
// The broadcasts and the all-gather are Communicator collectives like every other one of the job:
// sequence-numbered, flight-recorded and bounded by the collective timeout (contract 6 of docs/ARCHITECTURE.md). So a rank
// that dies mid-save ends the save as a collective timeout on its peers instead of a silent hang,
// and a rank whose file write (step 2) or commit (step 4) outlasts the others' by more than the
// timeout is reported the same way: keep --collective-timeout above the time one rank file takes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/ckpt/format.hpp"
#include "shardtrain/comm/communicator.hpp"

namespace shardtrain::ckpt {

struct SaveOptions {
  bool update_latest = true;  // replace <dir>/latest after the commit
  int keep = 0;               // > 0: after the commit rank 0 prunes to the newest `keep` (commit.hpp)
  // Rank 0 refuses to start (IoError, nothing written) when statvfs(ckpt_dir) shows less free space
  // than the checkpoint's tensor bytes plus 1 MiB. Turn off on file systems that report no free
  // space figure (some FUSE mounts report 0). Pruning runs after the commit, so --keep K needs room
  // for K+1 checkpoints.
  bool check_free_space = true;
  // When non-empty (tensor name -> sum64): rank 0 refuses to commit, with IoError naming the
  // tensor, when the pieces written add up to another checksum. The end-to-end check of a rewrite
  // of existing tensors (ckpt-reshard): data read from a corrupt source never becomes a checkpoint.
  std::map<std::string, std::uint64_t> expected_checksums{};
  // When set: called on rank 0 after every rank file is written and their pieces cover every
  // tensor, before expected_checksums are compared and the index is written; a throw aborts the commit (step_N.tmp removed) and every rank throws that error. For a
  // check that runs while the files are written (ckpt-reshard hashes its source meanwhile).
  std::function<void()> before_commit{};
};

// Timings in seconds; bytes of this rank's file and of the whole checkpoint (all files + index).
struct SaveResult {
  std::string path;            // the committed folder
  std::int64_t step = 0;
  std::int64_t bytes_local = 0;
  std::int64_t bytes_total = 0;
  double write_s = 0;          // this rank: HDF5 create + write + close (to the page cache) + piece checksums
  double sync_s = 0;           // this rank: waiting for fsync overlapped with the file's SHA-256 (with several
                               // files, file k's runs while file k+1 is written; only the wait counts)
  double commit_s = 0;         // gather, index, renames (rank 0), waiting for rank 0 (others)
  double total_s = 0;          // whole collective call on this rank
  double snapshot_s = 0;       // async only: the host copy (the training stall), else 0
  double wait_s = 0;           // async only: time save() waited for the previous save
};

// Collective over `comm` (every rank calls it with the same dir, manifest and tensor list; each with
// its own pieces). `tensors` lists every logical tensor of the checkpoint; the pieces of all ranks
// together must cover each tensor exactly once (spread_pieces does this for replicated state).
// Writes <ckpt_dir>/step_<manifest.step>/ and returns once it is committed on every rank.
// Throws IoError (naming the file and what to do) or UsageError on every rank when any rank failed;
// CommunicationError when one of its collectives timed out (a peer died or hung).
SaveResult save_checkpoint(const std::string& ckpt_dir, const CheckpointManifest& manifest,
                           const std::vector<TensorSpec>& tensors, const std::vector<PieceView>& pieces,
                           Communicator& comm, const SaveOptions& options = {});

// The same commit protocol with `writers` rank files that need not be one per process: process
// `comm.rank()` writes rank files r = comm.rank(), comm.rank() + comm.size(), ... (< writers), calling
// pieces_of(r) for each just before writing it (the returned data must stay valid until the next
// call or the return). File r is flushed and hashed while file r + comm.size() is read and written. So one process can write a checkpoint laid out for W ranks, or W processes
// one file each (ckpt-reshard). manifest.writers = writers; bytes_local, write_s and sync_s sum
// this process's files. save_checkpoint is this with writers = comm.size() and pieces_of = its pieces.
SaveResult save_checkpoint_files(const std::string& ckpt_dir, const CheckpointManifest& manifest,
                                 const std::vector<TensorSpec>& tensors, int writers,
                                 const std::function<std::vector<PieceView>(int)>& pieces_of, Communicator& comm,
                                 const SaveOptions& options = {});

// Background checkpoint writer: save() returns once the previous save has finished and this rank's
// pieces are copied to host memory (a snapshot), and the new save runs save_checkpoint on a worker
// thread. The writer has its own group: the constructor splits `comm` into a child named "ckpt"
// (same ranks, same order) that only the worker thread uses, so the save's collectives carry the
// child's own sequence numbers and never interleave with the training collectives on `comm`.
// Every save is asynchronous: a Communicator exists only where MPI runs at MPI_THREAD_MULTIPLE
// (make_mpi_communicator refuses otherwise), so there is no synchronous fallback.
//
// The trainer, on every rank: at a save step, `stall = writer.save(manifest, tensors, pieces)`;
// every step `if (auto r = writer.poll()) log(*r)` (poll() rethrows a failed background save, so
// the job fails loudly at the next step); before exiting `writer.wait()`.
// Construction is collective over `comm` (the split takes one of its sequence numbers: construct
// the writer at the same point on every rank); destruction is collective over the writer's group
// (it frees it). Destroy the writer before MPI_Finalize. The destructor waits and logs (never
// throws) a pending failure.
class AsyncCheckpointWriter {
 public:
  AsyncCheckpointWriter(std::string ckpt_dir, Communicator& comm, SaveOptions options = {});
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Waits for the previous save (rethrowing its failure), copies the pieces' data (a snapshot; a
  // piece naming an unknown tensor: UsageError), then starts writing it. Returns the training stall:
  // the seconds this call held the caller (wait + copy).
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
  bool busy() const;  // a save is in flight or its result has not been collected

 private:
  struct Impl;  // the worker thread, the pending result, the snapshot buffer, the "ckpt" group (async_writer.cpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardtrain::ckpt
