// What Slurm recorded about finished and running jobs: each run of a job (a requeued job has
// several) with its state, times, CPUs and, from scontrol, its restarts and pending reason. Read
// from `sacct` where the cluster keeps accounting, else from `scontrol show job` (which keeps a
// finished job for the cluster's MinJobAge, 300 s by default). The parsers are pure; account_jobs
// runs the commands.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::slurm {

// One run of one Slurm job.
struct JobRun {
  std::string state;                                   // "COMPLETED", "REQUEUED", "CANCELLED", ...
  std::optional<double> submit, eligible, start, end;  // unix s (the cluster's local time)
  double run_s = 0;                                    // whole seconds, as Slurm keeps them
  int cpus = 0;
  std::optional<int> restarts;  // scontrol only
  std::string reason;           // scontrol only ("" or "None": none)
  std::optional<double> queue_wait_s() const;     // start - submit
  std::optional<double> resource_wait_s() const;  // start - eligible (after its dependencies)
};

// Slurm's "2026-12-04T03:04:05" (local time) as unix seconds, or nothing for Unknown/None/N/A/"".
std::optional<double> parse_time(const std::string& text);
// Slurm's [D-][HH:]MM:SS as seconds.
double parse_duration_s(const std::string& text);
// `sacct -n -P -X -D -o JobID,State,Submit,Eligible,Start,End,ElapsedRaw,AllocCPUS` output: job id ->
// its runs, in order (lines of another shape are skipped).
std::map<std::string, std::vector<JobRun>> parse_sacct(const std::string& text);
// `scontrol -o show job ID` output: the job's last run (a job that never started has no start:
// the StartTime of a pending job is a forecast).
std::optional<JobRun> parse_scontrol_job(const std::string& text);

// Slurm's `scontrol -o show job` line: true when its JobState is one a job does not leave
// (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE),
// or the line names no job (Slurm no longer knows it).
bool scontrol_job_has_ended(const std::string& scontrol_line);
// Asks scontrol about `job_id`: true when it has ended as above, or scontrol cannot say (it no
// longer knows the job, or fails).
bool job_has_ended(const std::string& job_id);

// The runs of each of `job_ids`: sacct's, and for a job sacct does not know, its scontrol record;
// source is "sacct" when sacct knew any job, else "scontrol show job"; a job neither knows has no
// entry. A missing or
// failing command counts as knowing nothing (a cluster without accounting).
struct JobAccounting {
  std::map<std::string, std::vector<JobRun>> runs;
  std::string source;
};
JobAccounting account_jobs(const std::vector<std::string>& job_ids);

}  // namespace shardtrain::slurm
