// The training command's arguments the launcher reads and rewrites (child_command.hpp).
#include "shardtrain/launch/child_command.hpp"

#include <charconv>
#include <filesystem>

#include "shardtrain/base/error.hpp"

namespace shardtrain::launch {
namespace {

// "--name VALUE" at i (value at i + 1) or "--name=VALUE" at i: the value's index and whether it is
// joined to the name; nothing when argv[i] is not this option.
struct Found {
  std::size_t index;
  bool joined;
};
std::optional<Found> option_at(const std::vector<std::string>& argv, std::size_t i, const std::string& name) {
  const std::string& a = argv[i];
  if (a == name) {
    if (i + 1 >= argv.size()) throw UsageError("the command's " + name + " has no value");
    return Found{i + 1, false};
  }
  if (a.size() > name.size() && a.compare(0, name.size() + 1, name + "=") == 0) return Found{i, true};
  return std::nullopt;
}

std::string value_of(const std::vector<std::string>& argv, const Found& f, const std::string& name) {
  return f.joined ? argv[f.index].substr(name.size() + 1) : argv[f.index];
}

std::optional<int> whole_number(const std::string& text) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

const char* const kRankCountOptions[] = {"-np", "-n", "--np", "--ntasks"};

}  // namespace

ChildCommand ChildCommand::parse(std::vector<std::string> argv) {
  if (argv.empty()) throw UsageError("no command given (usage: run-resilient [options] -- COMMAND...)");
  ChildCommand c;
  c.argv_ = std::move(argv);
  const auto& a = c.argv_;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (auto f = option_at(a, i, "--run-dir")) c.run_dir_ = value_of(a, *f, "--run-dir");
    if (auto f = option_at(a, i, "--ckpt-dir")) c.ckpt_dir_ = value_of(a, *f, "--ckpt-dir");
    if (a[i] == "--resume" || a[i].rfind("--resume=", 0) == 0) c.has_resume_ = true;
    if (auto f = option_at(a, i, "--global-batch")) {
      c.global_batch_ = whole_number(value_of(a, *f, "--global-batch"));
      if (!c.global_batch_) throw UsageError("the command's --global-batch is not a whole number");
    }
    if (auto f = option_at(a, i, "--micro-batch")) {
      const auto v = whole_number(value_of(a, *f, "--micro-batch"));
      if (!v || *v == 0) throw UsageError("the command's --micro-batch is not a positive whole number");
      c.micro_batch_ = *v;
    }
    if (!c.rank_count_at_) {
      for (const char* name : kRankCountOptions) {
        // -n and -np take the value as the next word only (mpirun's -n=4 is no option).
        const bool short_form = name[1] != '-';
        if (short_form ? a[i] == name : bool(option_at(a, i, name))) {
          const Found f = short_form ? Found{i + 1, false} : *option_at(a, i, name);
          if (f.index >= a.size()) throw UsageError(std::string("the command's ") + name + " has no value");
          c.rank_count_at_ = f.index;
          c.rank_count_joined_ = f.joined;
          break;
        }
      }
    }
  }
  if (c.run_dir_.empty()) throw UsageError("the command needs --run-dir DIR (where the step logs go)");
  if (c.ckpt_dir_.empty()) c.ckpt_dir_ = c.run_dir_ + "/checkpoints";
  return c;
}

std::optional<int> ChildCommand::rank_count() const {
  if (!rank_count_at_) return std::nullopt;
  const std::string& word = argv_[*rank_count_at_];
  return whole_number(rank_count_joined_ ? word.substr(word.find('=') + 1) : word);
}

std::vector<std::string> ChildCommand::for_attempt(int attempt, std::optional<int> world) const {
  std::vector<std::string> out = argv_;
  if (world && rank_count_at_) {
    std::string& word = out[*rank_count_at_];
    word = rank_count_joined_ ? word.substr(0, word.find('=') + 1) + std::to_string(*world) : std::to_string(*world);
  }
  if (attempt > 0 && !has_resume_) {
    out.push_back("--resume");
    out.push_back("auto");
  }
  return out;
}

std::vector<std::string> ChildCommand::on_hosts(std::vector<std::string> argv, const std::map<std::string, int>& live,
                                                const std::vector<std::string>& lost, bool in_allocation) {
  if (argv.empty() || lost.empty()) return argv;
  const std::string launcher = std::filesystem::path(argv[0]).filename().string();
  if (launcher == "mpirun" || launcher == "mpiexec" || launcher == "orterun") {
    std::vector<std::string> out{argv[0]};
    std::string hosts;
    for (const auto& [host, slots] : live) hosts += (hosts.empty() ? "" : ",") + host + ":" + std::to_string(slots);
    // -H alone is not enough: Open MPI 4 starts a daemon on every node of a Slurm allocation, the
    // lost one included, and fails ("An ORTE daemon has unexpectedly failed") until Slurm drops it;
    // orte_no_vm maps first and starts daemons only where ranks will run.
    out.insert(out.end(), {"--mca", "orte_no_vm", "1", "-H", hosts});
    if (in_allocation) out.insert(out.end(), {"--mca", "plm_slurm_args", "--overlap"});
    for (std::size_t i = 1; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      if (a == "-H" || a == "--host" || a == "-host") {
        ++i;  // and its value
        continue;
      }
      if (a.rfind("--host=", 0) == 0) continue;
      out.push_back(a);
    }
    return out;
  }
  if (launcher == "srun") {
    std::string hosts;
    for (const auto& h : lost) hosts += (hosts.empty() ? "" : ",") + h;
    argv.insert(argv.begin() + 1, "--exclude=" + hosts);
    if (in_allocation) argv.insert(argv.begin() + 1, "--overlap");
  }
  return argv;
}

}  // namespace shardtrain::launch
