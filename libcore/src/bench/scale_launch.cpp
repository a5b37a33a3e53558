#include "shardtrain/bench/scale_launch.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

#include "shardtrain/base/host.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/scaling/report.hpp"

namespace shardtrain {
namespace {

namespace fs = std::filesystem;

// The tools live beside this binary (build/bin or the install's bin); /proc/self/exe names it
// whatever the current folder or PATH.
std::string bin_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw IoError("cannot read /proc/self/exe to find the tools' folder (" + ec.message() + ")");
  return exe.parent_path().string();
}

std::string run_dir_for(const ScaleRunOptions& o, int w) { return o.out_dir + "/w" + std::to_string(w); }

long long parse_count(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 9 || !std::all_of(text.begin(), text.end(), ::isdigit))
    throw UsageError(what + ": \"" + text + "\" is not a positive integer");
  return std::stoll(text);
}

void validate(const ScaleRunOptions& o) {
  if (o.workers.empty()) throw UsageError("--workers: give at least one world size");
  if (o.tool != "ddp-train" && o.tool != "fsdp-train")
    throw UsageError("--tool " + o.tool + ": must be ddp-train or fsdp-train");
  for (const auto& a : o.train_args)
    if (a == "--run-dir" || a.rfind("--run-dir=", 0) == 0)
      throw UsageError("TRAIN-ARGS: leave out --run-dir; scale-bench run gives each W its folder OUT/w<W>");
  for (int w : o.workers) {  // never train into an old run folder: ddp-train would resume its checkpoint
    std::error_code ec;
    const std::string dir = run_dir_for(o, w);
    if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
      throw UsageError(dir + " exists and is not empty; remove it or choose another --out");
  }
  for (int w : o.workers) train_args_for(o, w);  // a weak-scaling batch that does not divide fails before any launch
}

// An exit code of the training job -> the same class here (error.hpp); anything else is a failure.
ExitCode exit_class(int rc) {
  switch (rc) {
    case 2: return ExitCode::kUsage;
    case 3: return ExitCode::kIo;
    case 4: return ExitCode::kCommunication;
    default: return ExitCode::kFailure;
  }
}

}  // namespace

std::vector<int> parse_workers(const std::string& list) {
  std::vector<int> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const long long w = parse_count(item, "--workers " + list);
    if (w < 1) throw UsageError("--workers " + list + ": a world size must be at least 1");
    if (std::find(out.begin(), out.end(), int(w)) != out.end())
      throw UsageError("--workers " + list + ": W=" + item + " is given twice");
    out.push_back(int(w));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::vector<std::string> train_args_for(const ScaleRunOptions& o, int w) {
  std::vector<std::string> args = o.train_args;
  if (o.strong) return args;
  const std::string flag = "--global-batch";
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string* value = nullptr;
    std::string prefix;
    if (args[i] == flag && i + 1 < args.size()) value = &args[i + 1];
    else if (args[i].rfind(flag + "=", 0) == 0) value = &args[i], prefix = flag + "=";
    if (!value) continue;
    const long long given = parse_count(value->substr(prefix.size()), flag);
    const long long first = o.workers.front();
    if (given * w % first != 0)
      throw UsageError(flag + " " + std::to_string(given) + " x " + std::to_string(w) + " / " + std::to_string(first) +
                       " is not a whole batch; weak scaling keeps the per-rank batch, so give a --global-batch "
                       "divisible by the first W");
    *value = prefix + std::to_string(given * w / first);
    return args;
  }
  if (o.workers.size() == 1) return args;
  throw UsageError("weak scaling (the default) scales --global-batch with W: give --global-batch in TRAIN-ARGS, "
                   "or --strong to keep one global batch");
}

std::vector<std::string> launch_argv(const ScaleRunOptions& o, int w, const std::string& bin, int cpus) {
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(w)};
  if (w > cpus) argv.push_back("--oversubscribe");  // Open MPI refuses more ranks than slots otherwise
  argv.push_back(bin + "/" + o.tool);
  for (auto& a : train_args_for(o, w)) argv.push_back(std::move(a));
  argv.push_back("--run-dir");
  argv.push_back(run_dir_for(o, w));
  return argv;
}

std::vector<std::string> run_scaling_series(const ScaleRunOptions& o) {
  validate(o);
  const std::string bin = bin_dir();
  if (find_on_path(bin + "/" + o.tool).empty()) throw IoError(bin + "/" + o.tool + ": not found beside scale-bench");
  if (find_on_path("mpirun").empty()) throw IoError("mpirun not found on PATH (Debian package openmpi-bin)");
  require_gnuplot();  // fail before the runs, not after minutes of training
  const int cpus = host_cpus();
  fs::create_directories(o.out_dir);
  std::vector<std::string> dirs;
  for (int w : o.workers) {
    const std::string log = run_dir_for(o, w) + ".log";
    std::cerr << "scale-bench run: W=" << w << (w > cpus ? " (oversubscribed: " + std::to_string(cpus) + " CPUs)" : "")
              << ", log " << log << std::endl;
    const int rc = run_child(launch_argv(o, w, bin, cpus), log);
    if (rc != 0)
      throw Error(exit_class(rc), o.tool + " at W=" + std::to_string(w) + " exited " + std::to_string(rc) + "; see " + log);
    dirs.push_back(run_dir_for(o, w));
  }
  ScalingReportOptions report;
  report.out_dir = o.out_dir;
  report.model_path = o.model_path;
  write_scaling_report(dirs, report);
  return dirs;
}

}  // namespace shardtrain
