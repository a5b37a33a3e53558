#include "shardtrain/slurm/job_control.hpp"

#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"

namespace shardtrain::slurm {
namespace {

// Runs a Slurm command; its output (stdout and stderr) names what went wrong when it fails.
void run_checked(const std::vector<std::string>& argv) {
  const ChildOutput out = run_child_captured(argv, true);
  if (out.status == 0) return;
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  std::string said = out.out;
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  throw IoError(line + " exited " + std::to_string(out.status) + (said.empty() ? "" : ": " + said));
}

}  // namespace

void signal_job_steps(const std::string& job_id, const std::string& signal_name) {
  run_checked({"scancel", "--signal=" + signal_name, job_id});
}

void requeue_job(const std::string& job_id) { run_checked({"scontrol", "requeue", job_id}); }

std::string srun_mpi_list() {
  // "MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\nspecific pmix plugin versions available: pmix_v4"
  ChildOutput out;
  try {
    out = run_child_captured({"srun", "--mpi=list"}, true);
  } catch (const IoError&) {
    return "";  // no srun on this machine
  }
  std::string listing;
  std::istringstream in(out.out);
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
