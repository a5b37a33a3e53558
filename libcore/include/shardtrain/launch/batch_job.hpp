// The training batch job of scripts/slurm/train.sbatch, run by `run-resilient --slurm-batch` (the
// script runs it and passes Slurm's time-limit warning, `--signal=B:USR1@120`, on to it). Its settings come from the environment sbatch gives the job: Slurm's
// variables (SLURM_JOB_ID, SLURM_NTASKS, ...) and the script's documented ones (SHARDTRAIN_HOME,
// RUN_DIR, STEPS, MODEL, TRAIN_ARGS, LAUNCHER, MIN_RANKS, SAVE_WAIT, ...; train.sbatch --help).
//
// Contract:
//   - read_batch_job is pure (the environment is a lookup function; no file is touched): defaults
//     filled in, numbers checked, the trainer's options built in a fixed order (data, seq-len, the
//     MODEL words, steps, ckpt-every, keep 3, resume auto, device, deterministic, TRAIN_ARGS,
//     run-dir). UsageError, naming the variable, for a malformed value, an option that TRAIN_ARGS
//     sets a second time (or --run-dir), MIN_RANKS above the job's tasks, an unknown LAUNCHER.
//   - batch_job_command / batch_job_launcher_options: what the launcher runs and how (pure).
//   - run_batch_job: checks the files (the tools, the dataset, exclude-node.sh) and the launcher
//     (srun's PMIx plugin, or mpirun on PATH), prints the job's line, runs the launcher
//     (launcher.hpp, SlurmBatch: live ranks from the allocation, the time-limit stop); returns its
//     exit status, 0 also when the job was requeued (after the time limit, or without a failing node).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/launch/launcher.hpp"

namespace shardtrain::launch {

struct BatchJobSettings {
  std::string job_id;         // SLURM_JOB_ID (required)
  std::string job_nodes;      // SLURM_JOB_NODELIST, for the job's line ("?" when unset)
  int restart_count = 0;      // SLURM_RESTART_COUNT: 0, then 1 after the first requeue, ...
  int ntasks = 1;             // SLURM_NTASKS: the ranks of the first launch
  std::string home;           // SHARDTRAIN_HOME, default SLURM_SUBMIT_DIR, else the working folder
  std::string bin;            // SHARDTRAIN_BIN, default HOME/build/bin
  std::string run_dir;        // RUN_DIR, default <submit folder>/run/<SLURM_JOB_NAME>-<job id>
  std::string data;           // DATA, default HOME/data/fortunes.h5
  std::string trainer = "ddp-train";  // TRAINER
  std::string launcher = "srun";      // LAUNCHER: srun or mpirun
  std::int64_t steps = 200;           // STEPS: the run's last step (the time-limit stop's "done")
  int min_ranks = 1;                  // MIN_RANKS
  int max_restarts = 5;               // MAX_RESTARTS
  double save_wait_s = 100;           // SAVE_WAIT, seconds
  std::vector<std::string> trainer_options;  // everything after the trainer's name
};

// A variable's value, or nothing when it is unset (an empty value counts as unset, as ${X:-d} does).
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
BatchJobSettings read_batch_job(const Environment& env, const std::string& working_folder);

// The command after run-resilient's `--`: the launch (srun --mpi=pmix --kill-on-bad-exit=1
// --ntasks N, or mpirun -np N), the trainer, its options.
std::vector<std::string> batch_job_command(const BatchJobSettings& job);
// The launcher's options: restarts, backoff 10 s, the log RUN_DIR/restarts-<job>.<restart count>.json,
// elastic restarts down to MIN_RANKS on the allocation's live ranks, exclude-node.sh, the time limit.
LauncherOptions batch_job_launcher_options(const BatchJobSettings& job);

// The process's environment, as read_batch_job takes it.
std::optional<std::string> process_environment(const std::string& name);

int run_batch_job(const BatchJobSettings& job);

}  // namespace shardtrain::launch
