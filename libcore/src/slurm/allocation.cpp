#include "shardtrain/slurm/allocation.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <regex>

#include "command.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain::slurm {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

std::vector<int> parse_tasks_per_node(const std::string& text) {
  // Slurm's compressed form: comma-separated parts, each COUNT or COUNT(xREPEAT). Counts are
  // bounded well below int's range so that a sum over nodes cannot overflow.
  static const std::regex part(R"(([0-9]{1,6})(?:\(x([0-9]{1,6})\))?)");
  const auto bad = [&] {
    return UsageError("SLURM_TASKS_PER_NODE '" + text + "' is not Slurm's task list (e.g. 2(x3),1)");
  };
  std::vector<int> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string piece = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::smatch m;
    if (!std::regex_match(piece, m, part)) throw bad();
    const int count = std::stoi(m[1].str());
    const int repeat = m[2].matched ? std::stoi(m[2].str()) : 1;
    if (repeat < 1 || out.size() + std::size_t(repeat) > 100000) throw bad();
    out.insert(out.end(), std::size_t(repeat), count);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int live_task_count(const std::vector<std::string>& job_nodes, const std::vector<int>& tasks_per_node,
                    const std::vector<std::string>& live_nodes) {
  long total = 0;
  for (std::size_t i = 0; i < job_nodes.size() && i < tasks_per_node.size(); ++i)
    if (std::find(live_nodes.begin(), live_nodes.end(), job_nodes[i]) != live_nodes.end()) total += tasks_per_node[i];
  return int(std::min<long>(total, std::numeric_limits<int>::max()));  // 10^5 nodes x 10^6 tasks fits a long
}

std::vector<std::string> expand_host_list(const std::string& list) {
  if (list.empty()) return {};
  return detail::run_checked({"scontrol", "show", "hostnames", list}).lines();
}

int live_ranks_now(const std::string& job_id) {
  const std::string ntasks = env_or("SLURM_NTASKS", "1");
  const std::vector<int> per_node = parse_tasks_per_node(env_or("SLURM_TASKS_PER_NODE", ntasks));
  const std::vector<std::string> job_nodes = expand_host_list(env_or("SLURM_JOB_NODELIST", ""));
  return live_task_count(job_nodes, per_node, live_nodes(job_id));
}

std::vector<std::string> live_nodes(const std::string& job_id) {
  const std::vector<std::string> lines = detail::run_checked({"squeue", "-h", "-j", job_id, "-o", "%N"}).lines();
  return lines.empty() ? std::vector<std::string>{} : expand_host_list(lines.front());
}

std::optional<int> slurmd_port() {
  if (!std::getenv("SLURM_JOB_ID")) return std::nullopt;
  const detail::Answer a = detail::run({"scontrol", "show", "config"}, /*stderr_too=*/false);
  if (!a.ran) return std::nullopt;
  const std::string& config = a.out;
  static const std::regex line(R"(SlurmdPort\s*=\s*(\d+))");
  std::smatch m;
  if (std::regex_search(config, m, line)) return std::stoi(m[1]);
  return 6818;
}

}  // namespace shardtrain::slurm
