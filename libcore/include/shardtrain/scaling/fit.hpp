// scale-bench fit: the step model's parameters (stepmodel/step_model.hpp) from measurements: the
// links' busbw and alpha from a collectives sweep (stepmodel/sweep.hpp), compute, straggler,
// overlap and the step's collectives from training runs' summaries (train/run_summary.hpp, which
// is why the fit sits above train). Least squares of relative residuals throughout.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/stepmodel/sweep.hpp"

namespace shardtrain {
struct RunSummary;  // train/run_summary.hpp
}  // namespace shardtrain

namespace shardtrain::scaling {

// One usable row of a collectives sweep.
struct CollectiveSample {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 0;
  double bytes = 0, time_s = 0;
};
// The rows of one implementation ("" = communicator-fast when present, else the only one) with
// ranks >= 2, bytes > 0 and wrong == 0. UsageError naming `where` when the implementation has no
// rows, a row's op is not modelled or has time_s <= 0, or fewer than two rows are usable.
std::vector<CollectiveSample> collective_samples(const CollectiveSweep& sweep, const std::string& impl,
                                                 const std::string& where, std::string* impl_used = nullptr);
// The same from a sweep file (read_collective_sweep); UsageError naming the file on a missing or
// malformed file.
std::vector<CollectiveSample> read_collectives(const std::string& path, const std::string& impl,
                                               std::string* impl_used = nullptr);

// busbw and alpha by least squares of the relative residuals (t - model) / t over the rows.
struct LinkFit {
  double busbw_Bps = 0, alpha_s = 0;
  int rows = 0;
  double rms_relative_residual = 0;
};
LinkFit fit_link(const std::vector<CollectiveSample>& rows);

// What a run's summary says about one step (train/finish.cpp writes it as summary.json).
struct RunSample {
  std::string path;
  int world = 1;
  double step_s = 0;           // median_step_s
  double tokens_per_step = 0;  // global tokens of one step: throughput_tokens_per_s x median_step_s
  double comm_total_s = 0, comm_exposed_s = 0;  // rank 0's medians (per_rank_medians)
  double forward_s = 0, backward_s = 0;          // rank 0's medians of the passes (0 when not logged)
  // communication.<op>: calls / steps, bytes / calls, for the all-reduces, reduce-scatters and
  // all-gathers issued at least once per step (fewer calls than steps are end-of-run traffic).
  // Phases by the run's ZeRO stage (its memory report's zero_stage): its parameter gathers hide behind the
  // forward pass (stages 1 and 2: all of them; stage 3: half, the other half re-gathers for
  // backward); everything else behind backward.
  std::vector<StepCollective> collectives;
};
// From the summary as read (`path` names it in errors).
RunSample run_sample_of(const RunSummary& summary, const std::string& path);
// RUN_DIR/summary.json (or a .json path itself) through read_run_summary, the file's one reader.
RunSample read_run(const std::string& run_dir);

// compute_s and straggler by least squares of the relative residuals of the runs' step times less
// the exposed communication each run measured: the compute is the runs' own whatever link they
// ran on, so that runs on one node (shared memory) and a sweep of another link (across nodes) fit
// one model.
struct ComputeFit {
  double compute_s = 0, straggler = 0;
  bool straggler_fitted = false;  // false when the runs cover fewer than two world sizes
  double rms_relative_residual = 0;
};
ComputeFit fit_compute(const std::vector<RunSample>& runs, Scaling scaling);

struct FitOptions {
  std::string collectives_path;
  std::vector<std::string> run_dirs;
  std::string impl;              // "" = communicator-fast when present
  std::string scaling = "auto";  // weak, strong, auto (from the runs' tokens per step)
  double overlap = -1;           // < 0: measured from the runs (1 - exposed / total)
};
// The forward and backward passes' shares of the compute (StepModel::forward_share and
// backward_share): means over the runs that log them of fwd_s and bwd_s over the step less its
// exposed communication; nullopt when no run logs them.
std::optional<std::pair<double, double>> measured_pass_shares(const std::vector<RunSample>& runs);
// fit_model also fits StepModel::intra and ::inter from the sweep's "intra-node" and "inter-node"
// rows when it has them (a sweep over ranks on several nodes, bench/collective_sweep.hpp).
StepModel fit_model(const FitOptions& options);

}  // namespace shardtrain::scaling
