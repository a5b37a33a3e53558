#include "shardtrain/slurm/submit.hpp"

#include <cctype>
#include <chrono>
#include <regex>
#include <thread>

#include "command.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain::slurm {
namespace {

detail::Answer sbatch_test_only(const std::vector<std::string>& options) {
  std::vector<std::string> argv = {"sbatch", "--test-only"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--wrap", "true"});
  return detail::run(argv);  // its answer is on stderr
}

}  // namespace

std::vector<std::string> chain_job_argv(const std::vector<std::string>& user_options, const std::string& job_name,
                                        const std::string& output, int ntasks, const std::string& dependency) {
  std::vector<std::string> argv = {"sbatch", "--parsable", "--open-mode=append", "--kill-on-invalid-dep=yes"};
  argv.insert(argv.end(), user_options.begin(), user_options.end());
  argv.insert(argv.end(), {"--job-name=" + job_name, "--output=" + output, "--ntasks=" + std::to_string(ntasks)});
  if (!dependency.empty()) argv.push_back("--dependency=" + dependency);
  return argv;
}

std::string job_id_of(const std::string& out) {
  std::string id = out.substr(0, out.find_first_of(";\n"));
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
  return id;
}

std::string submit_job(const std::vector<std::string>& sbatch_argv) {
  const detail::Answer out = detail::run(sbatch_argv, /*stderr_too=*/false);
  if (!out.ran) throw IoError(out.out);
  const std::string job = job_id_of(out.out);
  if (out.status != 0 || job.empty())
    throw IoError("sbatch exited " + std::to_string(out.status) + (job.empty() ? " without a job id" : ""));
  return job;
}

void require_job_shape(const std::string& what, const std::vector<std::string>& options, const std::string& hint) {
  const detail::Answer out = sbatch_test_only(options);
  if (!out.ok()) {
    const std::vector<std::string> said = out.lines();
    throw UsageError("the " + what + " job cannot run on this cluster: sbatch --test-only " + detail::command_text(options) +
                     " says: " + (said.empty() ? "" : said.back()) + " (" + hint + ")");
  }
}

bool job_shape_fits(const std::vector<std::string>& options) { return sbatch_test_only(options).ok(); }

bool reason_never_clears(const std::string& reason) {
  static const std::regex never(
      "PartitionConfig|PartitionNodeLimit|PartitionTimeLimit|BadConstraints|InvalidAccount|InvalidQOS|"
      "AccountNotAllowed|QOSMax[A-Za-z]*PerJobLimit|AssocMax[A-Za-z]*PerJobLimit");
  return std::regex_match(reason, never);
}

void cancel_jobs(const std::vector<std::string>& jobs) {
  if (jobs.empty()) return;
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), jobs.begin(), jobs.end());
  (void)detail::run(argv);
}

std::vector<std::string> cancel_if_never_starting(const std::vector<std::string>& jobs, double wait_s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  const detail::Answer queue = detail::run({"squeue", "-h", "-j", detail::joined(jobs, ","), "-o", "%i %j %r"}, false);
  std::vector<std::string> bad;
  for (const std::string& line : queue.lines()) {
    const auto sp = line.rfind(' ');
    if (sp != std::string::npos && reason_never_clears(line.substr(sp + 1))) bad.push_back(line);
  }
  if (!bad.empty()) cancel_jobs(jobs);
  return bad;
}

}  // namespace shardtrain::slurm
