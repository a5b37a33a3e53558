// The trainer's TensorBoard event files (issue 49; on unless --no-tensorboard): each rank writes
// RUN_DIR/tensorboard/rank_<R>/events.out.tfevents.* (telemetry/tensorboard_events.hpp), one
// record per step with the scalars of the step record the step log writes
// (tensorboard_step_scalars: equal to the step log's values by construction).
//
// When, in the job's phases (trainer.cpp):
//   set-up  check_tensorboard_folders: every rank creates its folder and proves it can write a file
//           there, before the resume and any training; a rank that cannot fails the job on every
//           rank (UsageError, exit 2; that rank's line names its folder);
//   resume  TensorBoardLog's constructor, once the first step S is known and the loop will run:
//           the restart rule (keep_tensorboard_steps_before): every event file of this rank keeps
//           the steps before S, so the killed attempt's steps at or past S are gone before this
//           attempt logs them again; rank 0 applies the same rule to the folders of ranks that
//           are not in this job (an elastic restart on fewer ranks); then a new file is opened;
//   loop    write(record) after each step-log line.
// A write that fails mid-run (a full disk) logs one warning naming the file and stops this rank's
// events for the rest of the attempt; the job, its step log and its checkpoints go on (the next
// attempt's restart rule drops a torn last record).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "job.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/telemetry/tensorboard_events.hpp"

namespace shardtrain {

// RUN_DIR/tensorboard, and rank R's folder in it (RUN_DIR/tensorboard/rank_<R>).
std::string tensorboard_root(const std::string& run_dir);
std::string tensorboard_rank_folder(const std::string& run_dir, int rank);

// Collective over job.comm (nothing, no collective, with --no-tensorboard): see above.
void check_tensorboard_folders(const Job& job);

class TensorBoardLog {
 public:
  // Applies the restart rule for a loop starting at `first_step`, then opens this rank's new
  // event file. Errors: the readers' (a malformed event file: UsageError naming it), IoError.
  TensorBoardLog(const Job& job, std::int64_t first_step);
  // The step's scalars; never throws (see above).
  void write(const StepRecord& record);

 private:
  bool job_scalars_;
  std::optional<TensorBoardEventWriter> writer_;  // empty once a write failed
};

}  // namespace shardtrain
