// AsyncCheckpointWriter (write.hpp): a snapshot on the caller's thread, save_checkpoint on a
// background thread over the writer's own "ckpt" group.
#include <chrono>
#include <future>

#include "internal.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/ckpt/write.hpp"
#include "snapshot.hpp"

namespace shardtrain::ckpt {

using detail::Snapshot;

struct AsyncCheckpointWriter::Impl {
  std::string dir;
  SaveOptions options;
  // The writer's group (split from the job's communicator). Only the background save submits to
  // it, and one save runs at a time, which is the Communicator's one-submitting-thread rule.
  std::unique_ptr<Communicator> comm;
  // The job's communicator: its step when a save is requested is stamped on the save's records.
  const Communicator* job_comm = nullptr;
  // The save in flight (std::async: a thread per save; get() returns after that thread finished).
  std::future<SaveResult> pending;
  // The last snapshot's buffer, reused by the next save(). The background save hands it back
  // before its result is ready, so the caller's thread touches it only when `pending` is empty.
  detail::SnapshotArena spare;

  // Waits for the in-flight save, rethrows its failure; returns the seconds waited.
  double wait_previous() {
    const Stopwatch watch;
    if (pending.valid()) pending.get();
    return watch.seconds();
  }

  void start(Snapshot snapshot, double wait_s) {
    const std::int64_t step = job_comm->step();
    pending = std::async(std::launch::async, [this, snap = std::move(snapshot), wait_s, step]() mutable {
      try {
        comm->set_step(step);  // from the group's one submitting thread
        SaveResult r = save_checkpoint(dir, snap.manifest, snap.tensors, snap.views(), *comm, options);
        r.snapshot_s = snap.snapshot_s;
        r.wait_s = wait_s;
        spare = std::move(snap.arena);
        return r;
      } catch (...) {
        spare = std::move(snap.arena);
        throw;
      }
    });
  }
};

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string ckpt_dir, Communicator& comm, SaveOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->dir = std::move(ckpt_dir);
  impl_->options = options;
  // Every rank, in the job's order; a fixed phase, since its thread runs beside the step loop.
  impl_->comm = comm.split(0, comm.rank(), "ckpt", Phase::kCheckpoint);
  impl_->job_comm = &comm;
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  try {
    wait();
  } catch (const std::exception& e) {
    log_line(std::string("checkpoint: a background save failed and its error was never collected: ") + e.what());
  }
}

void AsyncCheckpointWriter::reserve(std::size_t bytes) {
  if (busy() || impl_->spare.size() >= bytes) return;
  impl_->spare.resize(bytes);
  for (std::size_t i = 0; i < bytes; i += 4096) impl_->spare[i] = 0;  // fault every page in now
}

double AsyncCheckpointWriter::save(const CheckpointManifest& manifest, const std::vector<TensorSpec>& tensors,
                                   const std::vector<PieceView>& pieces) {
  // Wait for the previous save before copying, so two snapshots never coexist in memory.
  const Stopwatch held;
  const double wait_s = impl_->wait_previous();
  impl_->start(Snapshot::take(manifest, tensors, pieces, std::move(impl_->spare)), wait_s);
  return held.seconds();  // the whole time the caller was held
}

std::optional<SaveResult> AsyncCheckpointWriter::poll() {
  if (impl_->pending.valid() && impl_->pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    return impl_->pending.get();  // rethrows once; leaves `pending` empty
  return std::nullopt;
}

std::optional<SaveResult> AsyncCheckpointWriter::wait() {
  if (impl_->pending.valid()) return impl_->pending.get();
  return std::nullopt;
}

bool AsyncCheckpointWriter::busy() const { return impl_->pending.valid(); }

}  // namespace shardtrain::ckpt
