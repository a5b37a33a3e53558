// The job list of a submitted chain (RUN/jobs.txt): one line per job, "STAGE JOB_ID", written by
// the pipeline's submitters once sbatch has answered, read by `release-gate costs` (to ask Slurm's
// accounting about each job) and by people (to follow or scancel the chain). One writer and one
// reader, so the two sides cannot drift.
#pragma once
#include <string>
#include <vector>

namespace shardtrain::slurm {

struct ListedJob {
  std::string stage;   // the stage's name in its graph (one word: "train", "cycle-2/decide")
  std::string job_id;  // sbatch's id
};

// Writes `jobs` to `path` durably (replacing it), one "STAGE JOB_ID" line each, in the given order.
// IoError naming the path when it cannot be written.
void write_job_list(const std::string& path, const std::vector<ListedJob>& jobs);

// The jobs listed in `path`, in file order; none when there is no such file (a chain run here,
// with --local, has none). Lines that are not two words are passed over (a hand-added comment).
std::vector<ListedJob> read_job_list(const std::string& path);

// The error line when jobs of a chain can never start (the squeue lines of
// cancel_if_never_starting): "WHO: cancelled the chain: these jobs can never start:" and a line per job.
std::string never_starting_message(const std::string& who, const std::vector<std::string>& squeue_lines);

}  // namespace shardtrain::slurm
