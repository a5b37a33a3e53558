// Checkpoints during the step loop (contract 5 of docs/ARCHITECTURE.md): the manifest of the state after a step, written
// synchronously (ckpt::save_checkpoint, which commits and logs) or, with --async-ckpt, snapshotted
// to host memory and written by ckpt::AsyncCheckpointWriter's background thread.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "job.hpp"
#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/data/sampler.hpp"

namespace shardtrain {

class CheckpointSaver {
 public:
  // With --async-ckpt, starts the writer and reserves its snapshot buffer now, so the first save's
  // stall is a plain copy.
  explicit CheckpointSaver(Job& job);

  // Collective: saves the state after `completed` steps (sampler at `state`, learning rate `lr` of
  // the last step); returns the training stall in seconds.
  double save(std::int64_t completed, const data::SamplerState& state, double lr);
  // Each step: rethrows a failed background save, so the job fails loudly at that step.
  void poll();
  // At the end of the loop: waits for the background save in flight (rethrowing its failure).
  void wait();
  // The save committed since the last call (a synchronous one at save(), a background one seen by
  // poll() or wait()), once; nothing otherwise. For the live metrics.
  std::optional<ckpt::SaveResult> take_committed();

 private:
  ckpt::CheckpointManifest manifest_after(std::int64_t completed, const data::SamplerState& state, double lr) const;

  Job& job_;
  const std::vector<ckpt::TensorSpec> ckpt_tensors_;
  ckpt::SaveOptions save_options_;
  std::unique_ptr<ckpt::AsyncCheckpointWriter> async_writer_;  // null without --async-ckpt
  // Synchronous saves: the "ckpt" group (its own sequence numbers and flight record, phase ckpt),
  // as the asynchronous writer has; null with --async-ckpt.
  std::unique_ptr<Communicator> ckpt_comm_;
  std::optional<ckpt::SaveResult> committed_;  // take_committed()'s
};

}  // namespace shardtrain
