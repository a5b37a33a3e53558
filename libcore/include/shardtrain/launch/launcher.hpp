// The resilient launcher (run-resilient(1)): runs a training command (mpirun ... ddp-train ... or
// srun ...) and, when it fails, restarts it from the newest valid checkpoint, carrying out
// restart_policy.hpp's decisions:
//   - every attempt's output goes to our stdout and to RUN_DIR/attemptN.log;
//   - while it runs, its flight records are watched (attempt_watch.hpp): a command that outlives
//     its job's recorded failure by a grace is ended (SIGTERM, then SIGKILL), so the verdict does
//     not wait for mpirun's teardown of a node cut off from the network;
//   - a failed attempt (status not 0 and not 2) is judged (attempt_verdict.hpp): one verdict line
//     on stderr, RUN_DIR/attemptN.verdict.json, and its flight records moved to
//     RUN_DIR/flight.attemptN/ (records of an earlier job go to flight.before/ at the start);
//   - restarts get `--resume auto`; elastic restarts rewrite the rank count (child_command.hpp);
//   - --exclude-cmd CMD runs `CMD HOST RANK` once when the policy excludes a host;
//   - SIGUSR1 is recorded, not fatal (the current attempt runs to its end and is not restarted);
//     as a Slurm batch job's launcher (slurm_batch), it starts the time-limit stop instead
//     (time_limit.hpp): the ranks are asked to checkpoint, and the job is requeued unless done;
//   - the restart log (restart_log.hpp) is written when the launcher ends, whatever the ending;
//   - with a metrics port, the launcher serves its own series (launcher_metrics.hpp) from start to
//     end and names its endpoint in RUN_DIR/prometheus-launcher-targets.json (scrape_targets.hpp).
// The restart time of a restart: relaunch to the first step record written after it (the rank-0
// step log's wall-clock "time").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <optional>

#include "shardtrain/launch/child_command.hpp"
#include "shardtrain/launch/restart_policy.hpp"
#include "shardtrain/launch/time_limit.hpp"

namespace shardtrain::launch {

struct LauncherOptions {
  RestartPolicy policy;
  std::string log_path;      // "" : RUN_DIR/restarts.json
  std::string capacity_cmd;  // shell command printing how many ranks can run now ("" none)
  std::string exclude_cmd;   // shell command run as `CMD HOST RANK` ("" none)
  int metrics_port = 0;                   // 0: no metrics endpoint; else 1..65535, not the trainer's ports
  std::string metrics_bind = "127.0.0.1";  // the endpoint's address
  // The launcher of a Slurm batch job (run-resilient --slurm-batch, batch_job.hpp): with
  // min_ranks, the ranks a restart may use are the allocation's live ones (slurm/allocation.hpp,
  // in place of a capacity command); SIGUSR1 runs the time-limit stop, the ranks asked through
  // `scancel --signal=USR1` (srun's tasks, on every node) or through the command's process
  // (mpirun forwards it to its ranks); the launcher then returns 0 (requeued or done), or 1 when
  // the requeue failed.
  struct SlurmBatch {
    TimeLimitPlan time_limit;  // its job_id is the job's
    bool ranks_via_srun = true;
  };
  std::optional<SlurmBatch> slurm_batch;
  // UsageError for inconsistent options (a capacity command without min_ranks, min_ranks above
  // the command's rank count, elastic mode without a rank count or global batch in the command,
  // a metrics port outside 0..65535).
  void validate(const ChildCommand& command) const;
};

// Runs the job to its end; returns the launcher's exit status (0, 75 after an exclusion, else the
// last attempt's status).
int run_resilient(const LauncherOptions& options, const ChildCommand& command);

}  // namespace shardtrain::launch
