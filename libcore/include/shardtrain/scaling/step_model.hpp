// The alpha-beta model of one data-parallel training step at W ranks (scale-bench fit, predict,
// plan): pure computation, no MPI. Units: seconds, bytes, bytes per second; throughput in tokens
// per second.
//
//   T(W)    = c(W) + (1 - o) x comm(W) + c(W) x s x log2 W
//   c(W)    = compute_s           weak scaling (every rank keeps its batch)
//           = compute_s / W       strong scaling (the global batch is divided among the ranks)
//   comm(W) = sum over the collectives of one step (op, bytes of one call, calls per step) of
//             calls x (f_op(W) x bytes / busbw + k_op(W) x alpha), the ring cost as nccl-tests counts it:
//               all-reduce                  f = 2(W-1)/W   k = 2(W-1)
//               reduce-scatter, all-gather  f = (W-1)/W    k = W-1
//               broadcast                   f = 1          k = W-1     (all zero at W = 1)
//             `bytes` is the nccl-tests size of one call (comm/types.hpp), busbw the bus bandwidth
//             (bytes/s), alpha the latency of one ring step (s).
//   o       overlap: the share of communication hidden behind the backward pass, in [0, 1]
//   s       straggler coefficient: a synchronous step waits for the slowest of W ranks, taken to be
//           c(W) x s x log2 W slower than the typical one
//   throughput(W) = tokens(W) / T(W), tokens(W) = W x tokens_per_step (weak) or tokens_per_step (strong)
//   speedup S(W) = throughput(W) / throughput(1);  efficiency E(W) = S(W) / W.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/comm/types.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/parallel/memory.hpp"

namespace shardtrain {
struct RunSummary;  // train/run_summary.hpp
}  // namespace shardtrain

namespace shardtrain::scaling {

enum class Scaling { kWeak, kStrong };
const char* scaling_name(Scaling s);  // "weak", "strong"

// One kind of collective issued every step: `calls` calls (an average may be fractional) of
// `bytes` each (nccl-tests size).
struct StepCollective {
  CollectiveOp op = CollectiveOp::kAllReduce;
  double bytes = 0;
  double calls = 1;
};

// One link of the two-level model (issue 35): bus bandwidth (bytes/s) and latency of one ring step
// (s). Unknown (busbw 0) unless fitted from a sweep's "intra-node"/"inter-node" rows or given.
struct Link {
  double busbw_Bps = 0, alpha_s = 0;
  bool known() const { return busbw_Bps > 0; }
};

struct StepModel {
  double compute_s = 0;        // compute of one step on one rank at W = 1 (s)
  Scaling scaling = Scaling::kWeak;
  double tokens_per_step = 1;  // tokens of one step at W = 1
  std::vector<StepCollective> collectives;
  double busbw_Bps = 0;        // bus bandwidth (bytes/s)
  double alpha_s = 0;          // latency of one ring step (s)
  double overlap = 0;          // o in [0, 1]
  double straggler = 0;        // s >= 0
  // Two levels: the links inside a node and between nodes, as scale-bench collectives measures
  // them with every group of the level running at once ("intra-node", "inter-node" rows). Both
  // unknown in a one-level model (the JSON then has neither "intra_node" nor "inter_node").
  Link intra, inter;
  nlohmann::json inputs = nlohmann::json::object();  // where the numbers came from (files, fits, options)

  // Throws UsageError naming the first unusable field ("model: busbw_Bps must be > 0, got 0").
  void validate() const;
  nlohmann::json to_json() const;  // {"format": "shardtrain-scaling-model", "version": 1, ...}
  // Throws UsageError naming `source` and the missing or mistyped field.
  static StepModel from_json(const nlohmann::json& j, const std::string& source);
};
// A model file (scale-bench fit's output, --model) through JsonFile and from_json: the one reader
// of the format. `what` says what the file was given as ("the --model step model").
StepModel read_step_model(const std::string& path, const std::string& what);

// Seconds of one call of `op` over `world` ranks by the ring formula above.
double collective_seconds(CollectiveOp op, double bytes, int world, double busbw_Bps, double alpha_s);

// The terms of T(W) and what follows from them.
struct StepTerms {
  int world = 1;
  double compute_s = 0, comm_s = 0, exposed_comm_s = 0, straggler_s = 0, step_s = 0;
  double intra_comm_s = 0, inter_comm_s = 0;  // predict_on: comm_s by link (0 from predict)
  double tokens_per_s = 0, speedup = 0, efficiency = 0;
  nlohmann::json to_json() const;
};
StepTerms predict(const StepModel& model, int world);  // validates the model; world >= 1

// ---------------------------------------------------------------- two levels (issue 35) ----------
//
// A topology: N nodes of L ranks (W = N x L). The data-parallel collectives of a step run either
//   flat          one group of W ranks. One node: the intra link (the one-level link when intra is
//                 unknown). Several nodes: the one-level link (busbw_Bps, alpha_s), which fit takes
//                 from the sweep's flat rows: fitted on a sweep across nodes, it is the flat
//                 algorithm's measured cost on those links (how many bytes cross a node boundary
//                 depends on the algorithm and the placement: halving/doubling on node-contiguous
//                 ranks already sends only 1/L of them across, a ring or interleaved ranks more);
//   hierarchical  (comm/hierarchical.hpp) all-reduce = reduce-scatter over L ranks on intra +
//                 all-reduce of bytes / L over N ranks on inter + all-gather over L on intra;
//                 reduce-scatter = reduce-scatter over L on intra + of bytes / L over N on inter;
//                 all-gather the mirror; broadcast flat. Needs both links, and equals flat when
//                 N = 1 or L = 1;
//   auto          per collective (size), the cheaper of the two: what --allreduce auto picks.
struct Topology {
  int nodes = 1, ranks_per_node = 1;
  int world() const { return nodes * ranks_per_node; }
  std::string describe() const;  // "2x2"
};
// "2x2,3x1" -> {{2, 2}, {3, 1}}; UsageError naming `what` otherwise.
std::vector<Topology> parse_topologies(const std::string& text, const std::string& what = "--topology");

enum class CommLayout { kFlat, kHierarchical, kAuto };
const char* comm_layout_name(CommLayout l);  // "flat", "hierarchical", "auto"
CommLayout parse_comm_layout(const std::string& text);  // UsageError naming the choices

// One call's predicted time on a topology, split by link, and what the layout chose for it.
struct CollectiveCost {
  double seconds = 0, intra_s = 0, inter_s = 0;
  bool hierarchical = false;
};
// UsageError when the layout is hierarchical (or auto on several nodes) and a link is unknown.
CollectiveCost collective_cost(const StepModel& model, CollectiveOp op, double bytes, const Topology& topology,
                               CommLayout layout);

// What --allreduce auto runs with a step model (ddp-train/fsdp-train --step-model): the smallest call
// size (bytes, nccl-tests size) from which `op` is priced cheaper hierarchical than flat on
// `topology` by collective_cost, and stays cheaper at every larger size. Both prices are affine in
// the size (alpha terms plus bytes over a bandwidth), so the two lines cross at most once:
//   0             hierarchical is cheaper at every size;
//   nullopt       flat is never beaten at large sizes (hierarchical's bytes term is not smaller),
//                 or there is nothing to choose (one node, one rank per node, a broadcast).
// UsageError, as collective_cost's, when a link is unknown on several nodes.
std::optional<std::uint64_t> hierarchical_from_bytes(const StepModel& model, CollectiveOp op, const Topology& topology);

// T on a topology and layout: as predict(), the communication priced by collective_cost; speedup
// and E against the same model at W = 1. `choices`, when given, gets one line per collective of the
// step: its size, the layout chosen, intra/inter seconds of one call.
StepTerms predict_on(const StepModel& model, const Topology& topology, CommLayout layout,
                     std::vector<std::string>* choices = nullptr);
// The table of every topology x layout (step, comm, its intra and inter parts, speedup, E) and the
// per-collective choices, and its JSON.
std::string topology_prediction_table(const StepModel& model, const std::vector<Topology>& topologies,
                                      const std::vector<CommLayout>& layouts);
nlohmann::json topology_prediction_json(const StepModel& model, const std::vector<Topology>& topologies,
                                        const std::vector<CommLayout>& layouts);

// "1,2,4,8" -> {1, 2, 4, 8}; UsageError naming `what` on an empty list, a non-number or a value < 1.
std::vector<int> parse_workers(const std::string& text, const std::string& what = "--workers");

// "8e9", "8GB" (10^9), "80GiB" (2^30), ... -> bytes; UsageError naming `what` unless > 0.
double parse_bytes(const std::string& text, const std::string& what);

// The deterministic simulation: the table (inputs, then W, step, speedup, E and the terms) and its JSON.
std::string prediction_table(const StepModel& model, const std::vector<int>& workers);
nlohmann::json prediction_json(const StepModel& model, const std::vector<int>& workers);

// The seed's all-reduce scaling lab (120 ms local compute, ring all-reduce, logarithmic straggler
// penalty; speedups 1.0/1.9/3.7/7.0/13.2x at 1/2/4/8/16 workers) with the parameters that
// reproduce it (the choice is argued in scaling_model.cpp).
StepModel seed_lab_model();
std::vector<std::pair<int, double>> seed_lab_speedups();  // the lab's published (W, speedup)

// ---------------------------------------------------------------- fit -----------------------------

// One row of a collectives sweep (`scale-bench collectives --json`).
struct CollectiveSample {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 0;
  double bytes = 0, time_s = 0;
};
// The rows of one implementation ("" = communicator-fast when present, else the only one) with
// ranks >= 2, bytes > 0 and wrong == 0. UsageError naming the file on a missing or malformed file.
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
  // communication.<op>: calls / steps, bytes / calls, for the all-reduces, reduce-scatters and
  // all-gathers issued at least once per step (fewer calls than steps are end-of-run traffic).
  std::vector<StepCollective> collectives;
};
// From the summary as read (`path` names it in errors).
RunSample run_sample_of(const RunSummary& summary, const std::string& path);
// RUN_DIR/summary.json (or a .json path itself) through read_run_summary, the file's one reader.
RunSample read_run(const std::string& run_dir);

// compute_s and straggler by least squares of the relative residuals of the runs' step times, the
// communication being the model's (link + each run's own collectives, exposed share 1 - overlap).
struct ComputeFit {
  double compute_s = 0, straggler = 0;
  bool straggler_fitted = false;  // false when the runs cover fewer than two world sizes
  double rms_relative_residual = 0;
};
ComputeFit fit_compute(const std::vector<RunSample>& runs, const LinkFit& link, Scaling scaling, double overlap);

struct FitOptions {
  std::string collectives_path;
  std::vector<std::string> run_dirs;
  std::string impl;              // "" = communicator-fast when present
  std::string scaling = "auto";  // weak, strong, auto (from the runs' tokens per step)
  double overlap = -1;           // < 0: measured from the runs (1 - exposed / total)
};
// fit_model also fits StepModel::intra and ::inter from the sweep's "intra-node" and "inter-node"
// rows when it has them (a sweep over ranks on several nodes, collective_sweep.hpp).
StepModel fit_model(const FitOptions& options);

// ---------------------------------------------------------------- plan ----------------------------

// A GPT-2 shaped ModelConfig of about `params` parameters (assumption, documented in the .cpp:
// d_model = 128 x n_layer, d_model a multiple of 64, 64-wide heads, the given vocab and context).
ModelConfig model_for_parameter_count(double params, int vocab, int seq_len);

struct PlanOptions {
  double params = 0;
  int ranks = 1;
  double memory_per_rank = 0;  // bytes
  int micro_batch = 1, seq_len = 1024, vocab = 50257;
  std::int64_t global_batch = 0;  // sequences per optimizer step; 0 = micro_batch x ranks
  double peak_flops = 100e9;      // per rank, for the compute time when the model gives none
  bool deterministic = false;
  DeviceKind device = DeviceKind::kCpu;  // what attention keeps for backward (backend.hpp) depends on it
  StepModel model;                // busbw, alpha, overlap, straggler (and compute_s when > 0)
  // Topology (issue 35): the ranks on `nodes` nodes of ranks / nodes each. With nodes > 1 every
  // layout is planned once per entry of `layouts`: its DP collectives priced by collective_cost on
  // the DP group's topology (nodes x ranks per node / tp: TP groups stay inside a node), its TP
  // collectives on the intra link when known.
  int nodes = 1;
  std::vector<CommLayout> layouts = {CommLayout::kFlat};
};
// One DP x TP layout: `tp` ranks per tensor-parallel group (the degrees the layout planner accepts,
// parallel/layout_plan.hpp: dividing the world, n_head and 4 x d_model, on a device with
// tensor-parallel ops), dp = ranks / tp, and a ZeRO stage over the DP axis. It fits exactly when
// the planner accepts it with --memory-per-rank as the budget (the trainers' answer for the same
// layout). Its memory is estimate_memory's (parallel/memory.hpp) with that tp;
// its step is
//   T = compute + (1 - overlap) x comm_dp(dp) + comm_tp(tp) + compute x s x log2(ranks)
// where comm_dp is the stage's collectives of the rank's local gradients/parameters (P_local =
// the TP rank's share, ParameterRegistry with that tp) over the dp ranks, and comm_tp the
// activation sums of GptModel's tensor-parallel forward and backward over the tp ranks, which sit
// on the critical path (not overlapped). Per micro-batch, N = micro_batch x seq_len, C = d_model:
// 4 L + 2 all-reduces of 4 N C bytes (embedding, two per block forward and two backward, the LM
// head), one all-gather of 4 N tp bytes (row maxima) and one all-reduce of 8 N bytes (the
// vocab-parallel cross-entropy's sums); times grad_accum per step.
struct PlanRow {
  std::string layout;  // "DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"; under TP "<that> x TP<t>"; on several nodes ", flat" etc.
  int zero_stage = 0;
  int dp = 1, tp = 1;
  int grad_accum = 1;  // micro-batches per DP rank per step
  MemoryEstimate memory;
  bool fits = false;
  std::string reason;  // why it is excluded ("" when it fits): the bytes over the budget, or the planner's refusal
  StepTerms predicted;  // comm_s = dp_comm_s + tp_comm_s
  double dp_comm_s = 0, tp_comm_s = 0;
  std::vector<StepCollective> collectives;     // over the DP axis
  std::vector<StepCollective> tp_collectives;  // over the TP axis (empty at tp = 1)
};
struct Plan {
  ModelConfig config;
  double params = 0;
  int grad_accum = 1;  // at tp = 1
  double compute_s = 0;
  std::vector<int> tp_degrees;  // the tensor-parallel degrees planned (1 first)
  std::string tp_note;          // why only TP 1 is planned ("" otherwise)
  std::vector<PlanRow> rows;  // fitting layouts by predicted throughput (descending), then the excluded
  std::string text() const;
  nlohmann::json to_json() const;
};
Plan plan_layouts(const PlanOptions& options);

}  // namespace shardtrain::scaling
