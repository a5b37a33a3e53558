// Submitting a chain of Slurm jobs (the release chain and the continual cycles of the pipeline
// tool): one shape of sbatch command for every job of a chain, the cluster's verdict on a job
// shape before anything is submitted, the job id sbatch answers, and the pending reasons that
// never clear. Commands run without a shell.
#pragma once
#include <string>
#include <vector>

namespace shardtrain::slurm {

// The sbatch command of one job of a chain, up to what it runs: sbatch --parsable
// --open-mode=append --kill-on-invalid-dep=yes, then `user_options` (the user's --sbatch words),
// then the job's --job-name, --output and --ntasks (after the user's, so that the chain finds its
// outputs where it named them), then --dependency=DEPENDENCY when not "". The caller appends the
// job's own further options and what it runs (a script, or --wrap COMMAND).
std::vector<std::string> chain_job_argv(const std::vector<std::string>& user_options, const std::string& job_name,
                                        const std::string& output, int ntasks, const std::string& dependency);

// Runs a chain job's sbatch command; returns the job id. IoError naming the status when sbatch
// fails or answers no id.
std::string submit_job(const std::vector<std::string>& sbatch_argv);

// sbatch's job id in its --parsable answer ("ID" or "ID;CLUSTER").
std::string job_id_of(const std::string& sbatch_parsable_output);

// sbatch --test-only with `options` (its answer is on stderr): UsageError "the WHAT job cannot run
// on this cluster: sbatch --test-only OPTIONS says: ANSWER (HINT)" when the cluster can never hold it.
void require_job_shape(const std::string& what, const std::vector<std::string>& options, const std::string& hint);
// The same check, answered: true when sbatch --test-only accepts `options`.
bool job_shape_fits(const std::vector<std::string>& options);

// Slurm's pending reasons that never clear by themselves (the job can never start as asked):
// PartitionConfig, PartitionNodeLimit, PartitionTimeLimit, BadConstraints, InvalidAccount,
// InvalidQOS, AccountNotAllowed, QOSMax*PerJobLimit, AssocMax*PerJobLimit. Resources, Priority,
// Dependency and the like clear (false).
bool reason_never_clears(const std::string& reason);

// Waits `wait_s` seconds, then asks squeue why `jobs` pend: when one pends for a reason that never
// clears, cancels all of `jobs` (scancel) and returns the squeue lines ("ID NAME REASON") of those
// that cannot start; empty when none.
std::vector<std::string> cancel_if_never_starting(const std::vector<std::string>& jobs, double wait_s);

// scancel every one of `jobs` (none: nothing); its failure is ignored (a chain being torn down).
void cancel_jobs(const std::vector<std::string>& jobs);

}  // namespace shardtrain::slurm
