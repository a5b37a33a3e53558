#include "shardtrain/slurm/job_list.hpp"

#include <fstream>
#include <sstream>

#include "shardtrain/base/durable_file.hpp"

namespace shardtrain::slurm {

void write_job_list(const std::string& path, const std::vector<ListedJob>& jobs) {
  std::string text;
  for (const auto& j : jobs) text += j.stage + " " + j.job_id + "\n";
  write_file_atomically(path, text);
}

std::vector<ListedJob> read_job_list(const std::string& path) {
  std::vector<ListedJob> jobs;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    ListedJob job;
    std::string extra;
    if (words >> job.stage >> job.job_id && !(words >> extra)) jobs.push_back(job);
  }
  return jobs;
}

std::string never_starting_message(const std::string& who, const std::vector<std::string>& squeue_lines) {
  std::string message = who + ": cancelled the chain: these jobs can never start:";
  for (const auto& line : squeue_lines) message += "\n  job " + line;
  return message;
}

}  // namespace shardtrain::slurm
