// Telemetry: the per-rank JSONL step log and the run summary (contract 7 of docs/ARCHITECTURE.md: every record carries
// the run's identities, so logs, summaries and checkpoints join by config hash, data snapshot,
// code version and checkpoint id).
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

#include "shardtrain/base/durable_file.hpp"  // write_json_file, for the summary writers

namespace shardtrain {

// Identities written into every step record and summary.
struct RunIdentity {
  std::string config_hash;         // hash of model + optimizer + batch configuration
  std::string data_snapshot_id;    // selection snapshot id of the training data
  std::string code_version;        // git describe at build time
  std::string checkpoint_id;       // checkpoint resumed from ("" when none: null in JSON)
  // The JSON keys, once (base/json_record.hpp: json_fields::write and read walk this list).
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("config_hash", &RunIdentity::config_hash), key("data_snapshot_id", &RunIdentity::data_snapshot_id),
                      key("code_version", &RunIdentity::code_version),
                      key("checkpoint_id", &RunIdentity::checkpoint_id, empty_as_null)};
  }
  bool operator==(const RunIdentity&) const = default;
};

// What one rank's point-to-point exchanges with one peer moved and took in one step (the comm
// layer's PeerStats of the data-parallel group, communicator.hpp: bytes received from the peer,
// seconds from posting the exchanges to their completion, the wait for a late peer included).
struct PeerTransfer {
  std::uint64_t bytes = 0;
  double seconds = 0;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("bytes", &PeerTransfer::bytes), key("s", &PeerTransfer::seconds)};
  }
  bool operator==(const PeerTransfer&) const = default;
};

// One step of one rank. Times in seconds; the JSON adds "time", the wall clock (unix seconds)
// when the record was written, "pid", the rank's process id, and "host", its host name, so a
// launcher can time restarts, a test can signal a given rank, and a reader of a multi-node job
// can tell which node a rank's steps ran on, from the step log alone.
struct StepRecord {
  std::int64_t step = 0;
  double data_s = 0, fwd_s = 0, bwd_s = 0, comm_total_s = 0, comm_exposed_s = 0, opt_s = 0, ckpt_s = 0, step_s = 0;
  double comm_cpu_s = 0;  // CPU time the communication thread spent on this step's collectives
  // Tensor parallelism: the TP group's collectives of the step (in flight), and the part of it the
  // compute thread waited for (the TP sums sit on the critical path: exposed unless overlapped).
  double tp_comm_s = 0, tp_exposed_s = 0;
  std::int64_t tokens = 0;  // tokens this rank processed in the step
  double loss = 0;          // global mean loss of the step
  double lr = 0, grad_norm = 0;
  // The job's throughput as this rank timed the step (all ranks' tokens of the step over its
  // step_s) and the MFU of that rate (at most 1): what the progress line, the live metrics and the
  // TensorBoard events report, computed once where the step ends (train/step_loop.cpp).
  double tokens_per_s = 0, mfu = 0;
  nlohmann::json extra;     // e.g. hold-out losses on evaluation steps
  // By peer world rank, the step's exchanges (JSON "peers": {"R": {"bytes", "s"}}, written only
  // when not empty: a one-rank run, or collectives that all ran in the library, have none).
  std::map<int, PeerTransfer> peers;
  // The part of the line read by the field-list rule (base/json_record.hpp); the rest is read by
  // read_step_log's own rule for step logs (absent fields are 0, null floats NaN).
  static auto listed_fields() {
    using namespace json_fields;
    return std::tuple{key("peers", &StepRecord::peers, kOmittedWhenEmpty)};
  }
  nlohmann::json to_json(int rank, const RunIdentity& id) const;
};

// The timing columns of the step log, written once: each column's JSON name and its StepRecord
// field, in the order the run summary gathers them (run_summary.hpp). StepRecord::to_json writes
// every column from this table, so a new timing field is added here and nowhere else.
struct TimingColumn {
  const char* name;
  double StepRecord::*field;
};
inline constexpr TimingColumn kTimingColumns[] = {
    {"data_s", &StepRecord::data_s},
    {"fwd_s", &StepRecord::fwd_s},
    {"bwd_s", &StepRecord::bwd_s},
    {"comm_total_s", &StepRecord::comm_total_s},
    {"comm_exposed_s", &StepRecord::comm_exposed_s},
    {"comm_cpu_s", &StepRecord::comm_cpu_s},
    {"tp_comm_s", &StepRecord::tp_comm_s},
    {"tp_exposed_s", &StepRecord::tp_exposed_s},
    {"opt_s", &StepRecord::opt_s},
    {"ckpt_s", &StepRecord::ckpt_s},
    {"step_s", &StepRecord::step_s},
};
inline constexpr int kNumTimingColumns = int(std::size(kTimingColumns));
// Index of a column of kTimingColumns by name (compile-time; -1 if there is none), so that code
// reading one column does not break when a column is added.
constexpr int timing_column(std::string_view name) {
  for (int c = 0; c < kNumTimingColumns; ++c)
    if (name == kTimingColumns[c].name) return c;
  return -1;
}

// The compute seconds of a step: forward, backward and optimizer (what the live metrics' "compute"
// section and the TensorBoard "time/compute_s" scalar report).
inline double compute_seconds(const StepRecord& r) { return r.fwd_s + r.bwd_s + r.opt_s; }

// One step record read back from a step log.
struct StepLogEntry {
  StepRecord record;         // fields absent from the line stay 0; an absent or null loss is NaN
  bool has_loss = false;     // "loss" present (a number, or null for a non-finite loss)
  bool has_timings = false;  // every column of kTimingColumns present
  bool has_tokens = false;   // "tokens" present
  std::size_t line = 0;      // 1-based line of the file
  double written_at = 0;     // "time": unix seconds when the rank wrote the line (0 when absent)
  std::int64_t pid = 0;      // "pid": the writing rank's process id (0 when absent)
  std::string host;          // "host": the writing rank's host name ("" when absent: older logs)
  std::string checkpoint_id; // "checkpoint_id": the checkpoint the run resumed from ("" none)
};

// A step log read back: the one reader of the format (equiv-check, the scaling report and the
// straggler scores all read through it), with one rule for what a log may hold:
//   * blank lines are skipped;
//   * a line that is the beginning of a JSON object cut short (a rank killed while writing it)
//     is skipped and counted in torn_lines: the run resumed after it, so more lines may follow;
//   * any other line that is not a JSON object is an error: UsageError "FILE:LINE: not a JSON
//     object (is this a JSONL step log?)";
//   * an object without an integer "step" is another kind of record: counted in other_records;
//   * a step record with a field of the wrong type is an error naming FILE:LINE and the field;
//   * a step logged more than once (a resumed run repeats the steps after its checkpoint): the
//     last record wins. Entries are in step order.
struct StepLogContents {
  std::string path;
  std::vector<StepLogEntry> steps;
  int torn_lines = 0, other_records = 0;
};
// Throws IoError when the file cannot be read, UsageError as above.
// Repeats::kKeepAll keeps every step record in file order instead (a launcher tracing attempts:
// each attempt's records, before a later attempt repeated their steps).
enum class Repeats { kLastWins, kKeepAll };
StepLogContents read_step_log(const std::string& path, Repeats repeats = Repeats::kLastWins);

// The step logs of a run folder, RUN_DIR/steps.rank<R>.jsonl, by rank R (empty: none). Throws
// IoError when the folder cannot be listed.
std::map<int, std::string> find_step_logs(const std::string& run_dir);

// Appends one JSON object per line to `path`, flushed per line so a killed run keeps its log.
class StepLog {
 public:
  StepLog(const std::string& path, int rank, RunIdentity identity);
  void append(const StepRecord& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int rank_;
  RunIdentity identity_;
  std::ofstream out_;
};

// min / median / max of a series (median of an even count: mean of the middle two).
struct SeriesStats {
  double min = 0, median = 0, max = 0;
  static SeriesStats of(std::vector<double> values);
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("min", &SeriesStats::min), key("median", &SeriesStats::median), key("max", &SeriesStats::max)};
  }
  bool operator==(const SeriesStats&) const = default;
};

}  // namespace shardtrain
