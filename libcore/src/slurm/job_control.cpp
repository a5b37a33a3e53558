#include "shardtrain/slurm/job_control.hpp"

#include <sstream>

#include "command.hpp"

namespace shardtrain::slurm {

void signal_job_steps(const std::string& job_id, const std::string& signal_name) {
  detail::run_checked({"scancel", "--signal=" + signal_name, job_id});
}

void requeue_job(const std::string& job_id) { detail::run_checked({"scontrol", "requeue", job_id}); }

std::string srun_mpi_list() {
  // "MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\nspecific pmix plugin versions available: pmix_v4"
  const detail::Answer a = detail::run({"srun", "--mpi=list"});
  if (!a.ran) return "";  // no srun on this machine
  std::string listing;
  std::istringstream in(a.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MPI plugin", 0) == 0) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) listing += (listing.empty() ? "" : " ") + w;
  }
  return listing;
}

bool lists_mpi_plugin(const std::string& listing, const std::string& plugin) {
  std::istringstream words(listing);
  for (std::string w; words >> w;)
    if (w == plugin) return true;
  return false;
}

}  // namespace shardtrain::slurm
