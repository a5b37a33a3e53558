// Runs a benchmark spec (bench_spec.hpp): its setup steps once, then each round's variants one
// after another (no shell unless a command names one), each command's stdout and stderr in its
// log WORK/rROUND/VARIANT.log, and reads each run's readings into a RunRow (bench_figures.hpp).
// The figures are computed from the rows afterwards, so a run is only ever commands and reads.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/bench/bench_figures.hpp"
#include "shardtrain/bench/bench_spec.hpp"

namespace shardtrain::bench {

struct CompareOptions {
  std::string bin_dir;   // the tools' folder ({bin}); "" = the folder of this program
  std::string data_dir = "data";  // {data}: the data folder (the clone's data/ when run from its root)
  std::string work_dir;  // {work}; "" = a fresh folder under $TMPDIR (or /var/tmp), removed after a run
                         // that went through; a given one must be empty or absent (an old run folder
                         // would be resumed from its checkpoint) and is kept
  std::function<void(const RunRow& row, double wall_s)> on_row;  // after each run (progress)
};

// The folder of the running program (/proc/self/exe), where the tools are built or installed.
std::string this_program_dir();

// Every setup step and round: the rows, in the order run. Error (exit 1) when a command exits
// with a status its variant does not accept or runs past its timeout, naming the command, the
// status and the log, with the log's last lines; the work folder is then kept for a look. A
// SIGINT or SIGTERM meanwhile ends the running command's whole process group (mpirun and its
// ranks) and stops the benchmark the same way.
std::vector<RunRow> run_benchmark(const BenchSpec& spec, const CompareOptions& options);

// The rows again from the run folders an earlier run_benchmark left in options.work_dir (--work),
// running nothing: for a spec whose readings, ratios or checks changed since. Each run's wall
// time is read back from RUN.wall_s; a file a variant's cleanup removed is missing now.
// UsageError when work_dir is not given or holds no run of the spec's variants.
std::vector<RunRow> reread_benchmark(const BenchSpec& spec, const CompareOptions& options);

// The commands run_benchmark would run, expanded (setup steps, then round 1's variants), one per
// line, arguments quoted where they hold spaces: what --dry-run prints. Checks every "@NAME".
std::string planned_commands(const BenchSpec& spec, const CompareOptions& options);

// One reading of one run: `run_dir` is the run's folder (relative files are read there), `places`
// its placeholders, `wall_s` the command's seconds (none: a wall reading is missing), `row` the readings read before this one. A
// file that is missing or not readable, a pointer that is not there, a non-number: nothing (the
// table shows "missing" and counts it wrong); scale applied.
std::optional<double> read_reading(const Reading& reading, const Places& places, const std::string& run_dir,
                                   std::optional<double> wall_s, const std::map<std::string, double>& row);

// The files one run's readings read, each read (and a JSON one parsed) once however many readings
// take a number from it (a summary gives four, a log several regexes). Nothing for a file that
// cannot be read or parsed, as read_reading says.
class RunFiles {
 public:
  const std::optional<std::string>& text(const std::string& path);
  const std::optional<nlohmann::json>& document(const std::string& path);  // .jsonl: its records' array

 private:
  std::map<std::string, std::optional<std::string>> texts_;
  std::map<std::string, std::optional<nlohmann::json>> documents_;
};
// read_reading with the run's files read through `files`.
std::optional<double> read_reading(const Reading& reading, const Places& places, const std::string& run_dir,
                                   std::optional<double> wall_s, const std::map<std::string, double>& row,
                                   RunFiles& files);

}  // namespace shardtrain::bench
