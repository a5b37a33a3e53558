#include "shardtrain/slurm/submit.hpp"

#include <cctype>
#include <chrono>
#include <regex>
#include <sstream>
#include <thread>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"

namespace shardtrain::slurm {
namespace {

std::string joined(const std::vector<std::string>& words, const std::string& sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

ChildOutput sbatch_test_only(const std::vector<std::string>& options) {
  std::vector<std::string> argv = {"sbatch", "--test-only"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--wrap", "true"});
  return run_child_captured(argv, /*stderr_too=*/true);
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
  const ChildOutput out = run_child_captured(sbatch_argv);
  const std::string job = job_id_of(out.out);
  if (out.status != 0 || job.empty())
    throw IoError("sbatch exited " + std::to_string(out.status) + (job.empty() ? " without a job id" : ""));
  return job;
}

void require_job_shape(const std::string& what, const std::vector<std::string>& options, const std::string& hint) {
  const ChildOutput out = sbatch_test_only(options);
  if (out.status != 0)
    throw UsageError("the " + what + " job cannot run on this cluster: sbatch --test-only " + joined(options, " ") +
                     " says: " + last_line(out.out) + " (" + hint + ")");
}

bool job_shape_fits(const std::vector<std::string>& options) { return sbatch_test_only(options).status == 0; }

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
  try {
    run_child_captured(argv);
  } catch (const Error&) {
  }
}

std::vector<std::string> cancel_if_never_starting(const std::vector<std::string>& jobs, double wait_s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  const ChildOutput queue = run_child_captured({"squeue", "-h", "-j", joined(jobs, ","), "-o", "%i %j %r"});
  std::vector<std::string> bad;
  std::istringstream lines(queue.out);
  for (std::string line; std::getline(lines, line);) {
    const auto sp = line.rfind(' ');
    if (sp != std::string::npos && reason_never_clears(line.substr(sp + 1))) bad.push_back(line);
  }
  if (!bad.empty()) cancel_jobs(jobs);
  return bad;
}

}  // namespace shardtrain::slurm
