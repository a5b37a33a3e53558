#include "shardtrain/bench/bench_runner.hpp"

#include <signal.h>
#include <stdlib.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"

namespace shardtrain::bench {
namespace {

namespace fs = std::filesystem;

// A SIGINT or SIGTERM while a command runs: its children lead a process group of their own, so a
// terminal's Ctrl-C reaches only us; the watch below then ends the command's whole group (mpirun
// and its ranks) instead of leaving it running behind a dead benchmark.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// The handlers for the length of a benchmark; the previous ones back after it.
class StopOnSignals {
 public:
  StopOnSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// The last lines of a log, indented, for the message of a command that failed.
std::string tail_of(const std::string& path) {
  std::string out;
  for (const auto& l : last_lines_of(path, 15)) out += "\n  " + l;
  return out;
}

std::string quoted(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv)
    out += (out.empty() ? "" : " ") + (a.find_first_of(" \t\"'$") == std::string::npos ? a : "'" + a + "'");
  return out;
}

bool option_set(const BenchSpec& spec, const std::string& when) {
  if (when.empty()) return true;
  const auto it = spec.options.find(when);
  return it != spec.options.end() && !it->second.empty();
}

// Polled by run_child_limited while the command runs (every 1-20 ms): SIGKILLs the process that
// wrote the last record of the rule's step log once that record's step reaches after_step (once).
// Each poll reads only what the log gained since the last one. Never asks to end the command:
// the launcher under test is what must notice the lost rank.
class KillWatcher {
 public:
  KillWatcher(std::string file, long long after_step) : file_(std::move(file)), after_(after_step) {}
  bool operator()() {
    if (done_) return false;
    std::ifstream in(file_, std::ios::binary);
    if (!in || !in.seekg(read_to_)) return false;
    std::string fresh((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t end = fresh.rfind('\n');
    if (end == std::string::npos) return false;  // no whole record yet: read it again at the next poll
    read_to_ += std::streamoff(end + 1);
    fresh.resize(end);  // the whole records; the last is after the newline before it (or all of it)
    const std::string last = fresh.substr(fresh.rfind('\n') + 1);
    try {
      const auto record = nlohmann::json::parse(last);
      if (record.at("step").get<long long>() >= after_) {
        ::kill(record.at("pid").get<int>(), SIGKILL);
        done_ = true;
      }
    } catch (const nlohmann::json::exception&) {
      // not a step record (a blank line): the next one decides
    }
    return false;
  }

 private:
  std::string file_;
  long long after_;
  std::streamoff read_to_ = 0;  // the log's bytes up to its last whole record already read
  bool done_ = false;
};

struct Folders {
  std::string bin, data, work;
  bool temporary = false;
};

Folders folders_for(const CompareOptions& o) {
  Folders f{o.bin_dir.empty() ? this_program_dir() : o.bin_dir, o.data_dir, o.work_dir, o.work_dir.empty()};
  if (f.temporary) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/var/tmp") + "/shardtrain-compare.XXXXXX";
    if (!::mkdtemp(pattern.data())) throw IoError(pattern + ": cannot make the work folder (" + std::strerror(errno) + ")");
    f.work = pattern;
  } else {
    std::error_code ec;
    if (fs::exists(f.work, ec) && !fs::is_empty(f.work, ec))
      throw UsageError("--work " + f.work + " exists and is not empty; an old run folder would be resumed from its checkpoint");
    fs::create_directories(f.work, ec);
    if (ec) throw IoError("--work " + f.work + ": cannot create it (" + ec.message() + ")");
  }
  f.work = fs::absolute(f.work).string();
  f.data = fs::absolute(f.data).string();  // the same folder for a command that changes its own
  return f;
}

// Runs one command to its end; Error when its status is not one of `exit_ok` or it timed out.
double run_command(const std::vector<std::string>& argv, const std::string& log, double timeout_s,
                   const std::vector<int>& exit_ok, const std::function<bool()>& watch, const std::string& what) {
  LimitedRun r;
  try {
    r = run_child_limited(argv, log, timeout_s, [&] { return g_stop_signal != 0 || (watch && watch()); }, 5);
  } catch (const IoError& e) {  // a program not found, a log that cannot be written: say which command
    throw IoError(what + ": " + e.what());
  }
  if (r.stopped)
    throw Error(ExitCode::kFailure, what + " stopped by signal " + std::to_string(g_stop_signal) + "; its log: " + log);
  bool ok = !r.timed_out;
  if (ok) ok = std::find(exit_ok.begin(), exit_ok.end(), r.status) != exit_ok.end();
  if (!ok)
    throw Error(ExitCode::kFailure, what + " " + (r.timed_out ? "ran past its timeout_s" : "exited " + std::to_string(r.status)) +
                                        ": " + quoted(argv) + "; its log " + log + " ends:" + tail_of(log));
  return r.seconds;
}

void run_setup(const BenchSpec& spec, const Folders& f) {
  for (std::size_t i = 0; i < spec.setup.size(); ++i) {
    if (!option_set(spec, spec.setup[i].when)) continue;
    const std::string at = "/setup/" + std::to_string(i) + "/command";
    const Places places = places_for(spec, f.bin, f.data, f.work, 0, spec.variants.front().name);
    const auto argv = expand_command(spec, spec.setup[i].command, places, spec.path + ": " + at);
    run_command(argv, f.work + "/setup-" + std::to_string(i + 1) + ".log", 3600, {0}, {}, "setup step " + std::to_string(i + 1));
  }
}

// The readings of one run, in the spec's order (a derived reading uses those before it).
RunRow read_row(const BenchSpec& spec, const Variant& v, int round, const Places& places, std::optional<double> wall_s) {
  RunRow row{round, v.name, {}};
  RunFiles files;
  for (const auto& r : spec.readings) {
    if (!r.variants.empty() && std::find(r.variants.begin(), r.variants.end(), v.name) == r.variants.end()) continue;
    if (const auto value = read_reading(r, places, places.at("run"), wall_s, row.values, files)) row.values[r.name] = *value;
  }
  return row;
}

struct Ran {
  RunRow row;
  double wall_s = 0;
};

Ran run_variant(const BenchSpec& spec, const Folders& f, int round, const Variant& v) {
  const Places places = places_for(spec, f.bin, f.data, f.work, round, v.name);
  const std::string at = spec.path + ": /variants/" + std::to_string(&v - spec.variants.data()) + "/command";
  const auto argv = expand_command(spec, v.command, places, at);
  fs::create_directories(places.at("run"));  // for a command that writes into it before any tool does
  std::function<bool()> watch;
  if (v.kill) watch = KillWatcher(expand(v.kill->file, places, "kill file"), v.kill->after_step);
  const double wall = run_command(argv, places.at("log"), v.timeout_s, v.exit_ok, watch,
                                  "round " + std::to_string(round) + " variant " + v.name);
  char seconds[40];
  std::snprintf(seconds, sizeof seconds, "%.17g\n", wall);  // every digit: --reread gives the same figures
  std::ofstream(places.at("run") + ".wall_s") << seconds;
  RunRow row = read_row(spec, v, round, places, wall);
  if (!v.cleanup.empty())
    run_command(expand_command(spec, v.cleanup, places, spec.path + ": cleanup of " + v.name), places.at("log"), 600, {0}, {},
                "round " + std::to_string(round) + " cleanup of " + v.name);
  return {row, wall};
}

}  // namespace

std::string this_program_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw IoError("cannot read /proc/self/exe to find the tools' folder (" + ec.message() + ")");
  return exe.parent_path().string();
}

std::vector<RunRow> run_benchmark(const BenchSpec& spec, const CompareOptions& options) {
  const StopOnSignals stop_on_signals;
  const Folders f = folders_for(options);
  // The spec's environment (Open MPI as root, oversubscription) is every command's: ours, inherited.
  const Places base = places_for(spec, f.bin, f.data, f.work, 0, spec.variants.front().name);
  for (const auto& [name, value] : spec.env) ::setenv(name.c_str(), expand(value, base, spec.path + ": /env/" + name).c_str(), 1);
  run_setup(spec, f);
  std::vector<RunRow> rows;
  for (int round = 1; round <= spec.rounds; ++round) {
    fs::create_directories(f.work + "/r" + std::to_string(round));
    for (const Variant* v : round_order(spec, round)) {
      Ran ran = run_variant(spec, f, round, *v);
      if (options.on_row) options.on_row(ran.row, ran.wall_s);
      rows.push_back(std::move(ran.row));
    }
  }
  if (f.temporary) {
    std::error_code ec;
    fs::remove_all(f.work, ec);  // best effort: the figures are already read
  }
  return rows;
}

std::vector<RunRow> reread_benchmark(const BenchSpec& spec, const CompareOptions& options) {
  std::error_code ec;
  if (options.work_dir.empty() || !fs::is_directory(options.work_dir, ec))
    throw UsageError("--reread needs --work DIR, the folder of an earlier compare run's rounds");
  const std::string work = fs::absolute(options.work_dir).string();
  const std::string bin = options.bin_dir.empty() ? this_program_dir() : options.bin_dir;
  const std::string data = fs::absolute(options.data_dir).string();
  std::vector<RunRow> rows;
  for (int round = 1; round <= spec.rounds; ++round)
    for (const Variant* v : round_order(spec, round)) {
      const Places places = places_for(spec, bin, data, work, round, v->name);
      if (!fs::exists(places.at("log"), ec)) continue;  // not run (the round or the variant)
      std::optional<double> wall;
      double seconds = 0;
      if (std::ifstream(places.at("run") + ".wall_s") >> seconds) wall = seconds;
      rows.push_back(read_row(spec, *v, round, places, wall));
    }
  if (rows.empty()) throw UsageError("--work " + options.work_dir + " holds no run of " + spec.path + "'s variants");
  return rows;
}

std::string planned_commands(const BenchSpec& spec, const CompareOptions& options) {
  const std::string bin = options.bin_dir.empty() ? this_program_dir() : options.bin_dir;
  const std::string work = options.work_dir.empty() ? "WORK" : options.work_dir;
  std::ostringstream s;
  const Places base = places_for(spec, bin, options.data_dir, work, 0, spec.variants.front().name);
  for (std::size_t i = 0; i < spec.setup.size(); ++i)
    if (option_set(spec, spec.setup[i].when))
      s << "setup " << (i + 1) << ": "
        << quoted(expand_command(spec, spec.setup[i].command, base, spec.path + ": /setup/" + std::to_string(i) + "/command"))
        << "\n";
  for (const Variant* v : round_order(spec, 1)) {
    const Places places = places_for(spec, bin, options.data_dir, work, 1, v->name);
    const std::string at = spec.path + ": /variants/" + std::to_string(v - spec.variants.data()) + "/command";
    s << v->name << ": " << quoted(expand_command(spec, v->command, places, at)) << "\n";
  }
  return s.str();
}

}  // namespace shardtrain::bench
