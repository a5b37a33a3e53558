// The scaling report (`scale-bench report RUN_DIR...`): run folders of one training problem at
// several world sizes W -> per W the throughput, speedup S(W) = throughput_W / throughput_1, scaling
// efficiency E(W) = throughput_W / (W x throughput_1) (docs/PERFORMANCE.md), each rank's time
// breakdown, the slowest rank and its section, an independent recomputation of E from the step
// logs, and an action per row. Written as report.json, report.md and SVG plots (scaling_plots.cpp,
// drawn by gnuplot). Units: seconds, tokens per second, bytes; E and S are plain ratios.
//
// Strong or weak scaling is read from the runs: one global batch for all = strong; one per-rank
// batch (global batch / W) for all = weak. A point with more ranks than its host has CPUs
// (summary "host.cpus") is "oversubscribed": its ranks take turns on cores, so it is marked in
// every table and plot and never presented as hardware scaling.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

struct RunSummary;  // train/run_summary.hpp

// The per-rank breakdown's sections, in table order: data, forward, backward, exposed
// communication, optimizer, checkpoint, other (step minus the six, clamped at 0).
inline constexpr int kBreakdownSections = 7;
extern const char* const kBreakdownNames[kBreakdownSections];  // "data", "forward", ...

// One rank's median seconds per step in each section, and its median step.
struct RankBreakdown {
  std::array<double, kBreakdownSections> section_s{};
  double step_s = 0;
};

// What the step logs say, recomputed here without the summary: over the steady steps (every
// step after the first when there are more than 3, the trainer's warm-up rule) that every rank
// logged, a step's tokens are the sum of the ranks' "tokens" and its time the slowest rank's
// step_s (a synchronous step ends when the last rank does).
struct LogThroughput {
  int steps = 0;                    // steady steps used
  double tokens_per_step = 0;       // median over those steps
  double median_step_s = 0;         // median of the per-step maximum over ranks
  double throughput_tokens_per_s = 0;
};

// One run folder, as the report sees it: from its summary (and step logs for `from_logs`).
struct ScalingRun {
  std::string run_dir;
  int world_size = 1;
  double throughput_tokens_per_s = 0;  // the summary's (rank 0's median step after warm-up)
  double median_step_s = 0;
  std::int64_t global_batch = 0;       // samples per step, all ranks
  nlohmann::json problem;              // config minus the layout and global_batch, + data snapshot
  std::string config_hash;
  int host_cpus = 0;                   // 0: cores unknown
  std::string hostname;
  std::vector<std::string> rank_hosts; // each rank's host (the summary's rank_hosts; empty: unknown)
  std::vector<RankBreakdown> ranks;    // from per_rank_medians.<column>.by_rank
  int slowest_rank = 0;                // the summary's (largest step minus exposed communication)
  std::vector<std::string> stragglers; // the summary's named stragglers, "rank R section"
  // The summary's network stragglers (telemetry/network_straggler.hpp), "host H at X MB/s against
  // Y MB/s": hosts whose links are slow, apart from the compute stragglers above.
  std::vector<std::string> network_stragglers;
  int zero_stage = 0;
  double optimizer_bytes = 0, memory_bytes = 0;  // rank 0's optimizer state and total peak
  std::optional<LogThroughput> from_logs;         // empty when the folder has no usable step log
  // The data-parallel group's communication by link (the summary's "communication", CommStats):
  // its all-reduce algorithm, and for a hierarchical run (comm/hierarchical.hpp) its nodes and the
  // busy seconds per step of the intra-node (node, node-gather) and inter-node (cross) groups: run
  // totals over the run's steps, set-up collectives included.
  std::string allreduce_algorithm;
  bool hierarchical = false;          // the summary has communication.levels
  int nodes = 0, ranks_per_node = 0;  // 0: unknown (or uneven nodes for ranks_per_node)
  double intra_node_s_per_step = 0, inter_node_s_per_step = 0;
  // --allreduce auto with a step model: the smallest all-reduce (bytes) that went hierarchical
  // (communication.hierarchical_from_bytes.AllReduce); unset: every bucket (kAlways) or none.
  std::optional<std::uint64_t> all_reduce_hierarchical_from;
  bool chosen_by_size = false;  // the summary has communication.hierarchical_from_bytes
};

// Reads RUN_DIR/summary.json through read_run_summary (train/run_summary.hpp, the file's one
// reader: UsageError naming the folder when it is missing, the file and the field when one is
// missing or mistyped) and the step logs. A run's world size W must be at least 1.
ScalingRun read_scaling_run(const std::string& run_dir);
// The summary part alone (tests build RunSummary values by hand); from_logs stays empty.
ScalingRun scaling_run_of(const RunSummary& summary, const std::string& run_dir);
// The recomputation above from each rank's step log (telemetry/step_log.hpp's read_step_log);
// entries without "tokens" or "step_s", and steps missing on some rank, are left out. Empty when
// no step is left.
std::optional<LogThroughput> throughput_from_records(const std::vector<std::vector<StepLogEntry>>& ranks);

// Relative tolerance between the summary's figures and the step-log recomputation (throughput and
// E). The two differ by construction only in which rank's step_s is used (rank 0's median vs the
// median of the per-step slowest rank): in a synchronous step every rank leaves the same final
// collective, so they differ by the ranks' skew at the step boundary, ~1 ms or less: under 5% for
// steps of 20 ms or more (the benchmark model's are ~225 ms), while a wrong token count (a factor
// of 2 at least) or a summary taken from other steps is far outside. Sub-20 ms toy steps and
// oversubscribed runs (ranks out of step) can be flagged without anything being wrong.
inline constexpr double kRecomputeTolerance = 0.05;

// Thresholds of the actions (why each: see scaling_report.cpp's actions_for).
struct ActionThresholds {
  double exposed_comm_share = 0.10;   // exposed communication above this share of a step
  double straggler_excess = 0.10;     // slowest rank's compute this much above the ranks' median
  double optimizer_share = 0.30;      // optimizer state above this share of rank 0's peak memory
  std::int64_t small_rank_batch = 4;  // per-rank samples per step below this
  double compute_slowdown = 0.10;     // weak scaling: per-rank compute this much slower than at W_1
};

// One row of the report: runs[i] of ScalingReport is points[i]'s run.
struct ScalingPoint {
  bool oversubscribed = false;
  std::optional<double> speedup, efficiency;        // empty without a W = 1 run
  std::optional<double> log_efficiency;             // E from the step logs (both W and W = 1)
  std::optional<double> throughput_deviation;       // |log - summary| / summary
  std::optional<double> efficiency_deviation;       // |log E - E| / E
  bool within_tolerance = true;                     // both deviations <= kRecomputeTolerance (when known)
  std::optional<double> predicted_efficiency;       // the --step-model file's E(W) (scaling_model.hpp); empty without one
  // With a --step-model that has both links and a hierarchical run on uniform nodes: the model's intra-
  // and inter-node seconds per step for that topology and layout (predict_on), beside the measured.
  std::optional<double> predicted_intra_node_s, predicted_inter_node_s;
  std::string slowest_section;                      // where the slowest rank loses most (W = 1: its largest)
  double exposed_comm_share = 0;                    // max over ranks of exposed comm / step
  std::vector<std::string> actions;                 // what limits this point and what to try
};

enum class ScalingMode { kSingle, kStrong, kWeak };
const char* mode_name(ScalingMode mode);  // "single", "strong", "weak"

struct ScalingReport {
  ScalingMode mode = ScalingMode::kSingle;
  std::vector<ScalingRun> runs;        // sorted by W
  std::vector<ScalingPoint> points;    // one per run, same order
  bool has_base = false;               // a W = 1 run exists: E and S are computed
  std::string formula;                 // "E(2) = 17,683 / (2 x 9,157) = 0.966" (empty without a base)
  std::string model_path;              // --step-model as given ("" when none)
  std::string prediction_note;         // the model used for the predicted column, or why it is empty
};

// Checks the runs belong together (UsageError naming the run folders otherwise: another training
// problem, two runs at one W, or global batches neither strong nor weak) and builds the report.
ScalingReport build_scaling_report(std::vector<ScalingRun> runs, const ActionThresholds& thresholds = {});

// "17,683" (rounded to an integer, thousands separated by commas).
std::string thousands(double value);

nlohmann::json report_json(const ScalingReport& report);
std::string report_markdown(const ScalingReport& report);

// scaling_plots.cpp: efficiency.svg and speedup.svg (against W, with the ideal line; only with a
// W = 1 run) and breakdown.svg (stacked per-rank sections per W), each from a gnuplot script and
// data files left next to it in `out_dir`. Returns the SVG file names written. Throws Error
// naming the package (gnuplot-nox) when gnuplot is not on PATH, and Error when gnuplot fails.
std::vector<std::string> write_scaling_plots(const ScalingReport& report, const std::string& out_dir);
// Throws the "gnuplot not found" Error above early, before any work.
void require_gnuplot();

struct ScalingReportOptions {
  std::string out_dir = ".";
  std::string model_path;  // --step-model: a scale-bench fit model file; predicted E per W
};
// The whole subcommand: reads the run folders, builds, writes report.json, report.md and the
// plots into out_dir, and returns the report.
ScalingReport write_scaling_report(const std::vector<std::string>& run_dirs, const ScalingReportOptions& options);

}  // namespace shardtrain
