#include "shardtrain/slurm/queue.hpp"

#include <cctype>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"

namespace shardtrain::slurm {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

QueueAnswer ask(const std::vector<std::string>& argv) {
  QueueAnswer a;
  if (find_on_path(argv[0]).empty()) {
    a.failure = "there is no squeue here";
    return a;
  }
  ChildOutput out;
  try {
    out = run_child_captured(argv, /*stderr_too=*/true);
  } catch (const Error& e) {
    a.failure = e.what();
    return a;
  }
  if (out.status != 0) {
    a.unknown_job = out.out.find("Invalid job id") != std::string::npos;
    a.answered = a.unknown_job;
    a.failure = trim(out.out);
    return a;
  }
  a.answered = true;
  std::istringstream lines(out.out);
  for (std::string line; std::getline(lines, line);)
    if (!trim(line).empty()) a.lines.push_back(trim(line));
  return a;
}

}  // namespace

QueueAnswer job_state(const std::string& job_id) { return ask({"squeue", "-h", "-j", job_id, "-o", "%T"}); }

QueueAnswer job_steps(const std::string& job_id) { return ask({"squeue", "-h", "-s", "-j", job_id, "-o", "%i"}); }

bool state_is_running(const std::string& state) {
  for (const char* s : {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED", "SIGNALING", "RESIZING", "STAGE_OUT"})
    if (state == s) return true;
  return false;
}

}  // namespace shardtrain::slurm
