// What squeue says about a job now: its state, and its running steps. Each answer says whether
// squeue answered at all (a missing squeue, or one that failed, is not "the job is gone"), so the
// caller can keep a job alive when Slurm cannot be asked.
#pragma once
#include <string>
#include <vector>

namespace shardtrain::slurm {

struct QueueAnswer {
  bool answered = false;            // squeue ran and exited 0 (or said the job id is unknown)
  bool unknown_job = false;         // squeue: "Invalid job id" (Slurm no longer knows the job)
  std::vector<std::string> lines;   // its output lines, trimmed, empty ones left out
  std::string failure;              // when !answered: what went wrong ("no squeue here", its output)
};

// `squeue -h -j JOB -o %T`: lines[0] is the job's state ("RUNNING", "PENDING", ...) while squeue
// lists it; no lines once it does not.
QueueAnswer job_state(const std::string& job_id);
// `squeue -h -s -j JOB -o %i`: the job's running steps ("123.0", "123.batch", ...).
QueueAnswer job_steps(const std::string& job_id);

// The states of a job that is still running (RUNNING, COMPLETING, SUSPENDED, CONFIGURING,
// STOPPED, SIGNALING, RESIZING, STAGE_OUT).
bool state_is_running(const std::string& state);

}  // namespace shardtrain::slurm
