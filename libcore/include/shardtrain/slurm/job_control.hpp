// What a running Slurm job asks of Slurm about itself: signalling its steps, requeueing it, and
// whether srun can start Open MPI ranks. Each is one command (scancel, scontrol, srun) run without
// a shell; a failure is an IoError naming the command and what it printed.
#pragma once
#include <string>
#include <vector>

namespace shardtrain::slurm {

// Every task of every step of job `job_id`, on every node, gets `signal_name` (e.g. "USR1"); the
// batch step (the job script and what it runs) does not: `scancel --signal=NAME JOB`.
void signal_job_steps(const std::string& job_id, const std::string& signal_name);

// Puts the job back in the queue (its processes are ended; it starts again, same job id, with
// SLURM_RESTART_COUNT one higher): `scontrol requeue JOB`.
void requeue_job(const std::string& job_id);

// What this cluster's `srun --mpi=list` prints, without its header line and with whitespace
// squeezed to single spaces: "none pmi2 pmix ...". "" when srun cannot be run.
std::string srun_mpi_list();
// Whether `listing` (srun_mpi_list's) names `plugin` as a whole word ("pmix", not "pmix_v4").
bool lists_mpi_plugin(const std::string& listing, const std::string& plugin);

}  // namespace shardtrain::slurm
