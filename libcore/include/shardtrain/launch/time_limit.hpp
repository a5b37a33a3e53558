// The time-limit stop of a Slurm batch job (run-resilient --slurm-batch, under the job script's
// `#SBATCH --signal=B:USR1@120`): Slurm's SIGUSR1 before the limit -> every rank asked to
// checkpoint -> wait until the checkpoint folder's `latest` changes (at most save_wait_s) -> the
// ranks end on their own (at most end_grace_s more, then the attempt is ended) -> done when the
// newest checkpoint is at or past the run's last step, else the job is requeued and resumes from
// that checkpoint (--resume auto).
//
// This class holds the protocol's decisions and the lines it prints, without clocks, files,
// signals or Slurm: the launcher feeds it the time (unix seconds) and `latest` (the committed
// checkpoint's name, "" none), and carries out what it answers. Lines carry no program prefix.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::launch {

struct TimeLimitPlan {
  std::string job_id;         // named in the requeue line
  double save_wait_s = 100;   // SAVE_WAIT: keep it below the --signal lead time
  double end_grace_s = 30;    // after the checkpoint (or the wait), for the ranks to exit
  std::int64_t last_step = 0; // the run's --steps: a checkpoint step_N with N >= it means done
};

class TimeLimitStop {
 public:
  explicit TimeLimitStop(TimeLimitPlan plan) : plan_(std::move(plan)) {}

  // The warning came at `now` with `latest` committed. Returns the line to print; the caller
  // then asks every rank to checkpoint. Once only (later calls return "").
  std::string begin(double now, const std::string& latest);
  bool begun() const { return begun_; }

  // While the attempt runs (after begin): the lines to print now (each said once) and whether
  // to end the attempt now (its ranks had end_grace_s after the checkpoint or the wait).
  struct Poll {
    std::vector<std::string> lines;
    bool end_attempt = false;
  };
  Poll poll(double now, const std::string& latest);

  // After the attempt ended (on its own or ended), with `latest` as it is then: whether to requeue
  // the job, and the lines to print (the checkpoint's fate, then "done" or "requeueing job J").
  struct Ending {
    bool requeue = true;
    std::vector<std::string> lines;
  };
  Ending finish(double now, const std::string& latest);

 private:
  std::string resumes_from() const;
  // A new checkpoint after the warning settles the stop: its line, once; nothing otherwise.
  std::optional<std::string> note_checkpoint(double now, const std::string& latest);

  TimeLimitPlan plan_;
  bool begun_ = false;
  double warned_at_ = 0;
  std::string before_;
  std::optional<double> settled_at_;  // when the checkpoint came or the wait ran out
};

// The step a checkpoint name says ("step_00000120" -> 120); nothing for any other name.
std::optional<std::int64_t> checkpoint_step(const std::string& name);

}  // namespace shardtrain::launch
