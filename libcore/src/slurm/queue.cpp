#include "shardtrain/slurm/queue.hpp"

#include "command.hpp"

namespace shardtrain::slurm {
namespace {

QueueAnswer ask(const std::vector<std::string>& argv) {
  const detail::Answer out = detail::run(argv);
  QueueAnswer a;
  if (!out.ran) {
    a.failure = "there is no squeue here";
    return a;
  }
  if (out.status != 0) {
    a.unknown_job = out.out.find("Invalid job id") != std::string::npos;
    a.answered = a.unknown_job;
    a.failure = out.said();
    return a;
  }
  a.answered = true;
  a.lines = out.lines();
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
