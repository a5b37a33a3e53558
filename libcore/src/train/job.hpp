// The training job's first phase, set-up (trainer.hpp's run_training runs the phases in order:
// set-up, resume, the step loop with evaluation, finish). Set-up validates the options, then
// builds everything the later phases share, in this order: the data selection, the model
// configuration, the layout plan (plan_training_layout: TP, ZeRO stage, precision, device,
// --memory-budget), the communicator and the DP x TP mesh, the run folder's ownership
// (run_folder_owner.hpp: a second job on the folder is refused here, before it writes anything),
// the rank -> host table (hosts.json), the backend, the strategy (initialised), and the run's
// identity. Every failure here is before any training or file output other than the run folder
// (a wrong --baseline fails first of all).
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/data/selection.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/parallel/strategy.hpp"
#include "shardtrain/telemetry/run_summary.hpp"
#include "shardtrain/train/run_folder_owner.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/train/trainer.hpp"

namespace shardtrain {

// The DP x TP mesh over the job's W ranks (W = DP x T): the T ranks of a tensor-parallel group are
// adjacent (world rank = dp_rank * T + tp_rank), so a group stays on one node when ranks fill
// nodes in order. Each axis is a Communicator group of its own, with its own sequence numbers and
// flight record, named uniquely in the job: "tp<d>" is the TP group of DP rank d, "dp<t>" the DP
// group of TP rank t (the job's group is then "world"). At T = 1 the data-parallel group is the
// job's group itself, named "dp" (no split).
//
// --allreduce hierarchical: the data-parallel group is wrapped in a hierarchical communicator
// (comm/hierarchical.hpp) over the nodes its ranks run on (host names, or SHARDTRAIN_NODE_OF_RANK),
// with sub-groups "<dp>.node", "<dp>.node-gather" and "<dp>.cross"; `dp` then points at it.
struct Mesh {
  int dp_size = 1, dp_rank = 0, tp_size = 1, tp_rank = 0;
  std::unique_ptr<Communicator> dp_group, tp_group;  // the splits (T > 1 only)
  std::unique_ptr<Communicator> dp_hierarchical;     // --allreduce hierarchical: over *dp_group or the job's group
  Communicator* dp = nullptr;  // data-parallel group: gradient sums, ZeRO shards, the sampler's ranks
  Communicator* tp = nullptr;  // tensor-parallel group; nullptr at T = 1
};

// What set-up built, handed to every later phase. The members are declared in the order they are
// built, so they are destroyed in reverse: the strategy, which refers to the backend and the
// communicator, goes first.
struct Job {
  const TrainOptions& options;
  // The run folder's ownership (rank 0; released last, after every file of the run is written).
  std::optional<RunFolderOwner> owner;
  std::optional<Baseline> baseline;     // --baseline, read before anything else
  std::unique_ptr<Communicator> comm;   // every rank of the job (named "dp" at T = 1, "world" under TP)
  Mesh mesh;                            // the DP x TP axes over comm
  int world = 1, rank = 0;
  std::vector<std::string> rank_hosts;  // every rank's host name, by world rank (RUN_DIR/hosts.json)
  data::TrainingData data;
  ModelConfig model;                    // options.model, the dataset's vocabulary filled in, validated
  int grad_accum = 1;                   // micro-batches per rank per step (contract 1 of docs/ARCHITECTURE.md)
  std::unique_ptr<Backend> backend;
  std::unique_ptr<TrainingStrategy> strategy;  // initialised from options.schedule.seed
  nlohmann::json run_config;            // the "config" of the summary and of every checkpoint
  RunIdentity identity;                 // checkpoint_id is the resume phase's to fill
  std::string ckpt_dir;                 // --ckpt-dir, or <run_dir>/checkpoints
  double resident_before_state = 0;     // bytes resident before the backend and strategy allocated (MemoryReport::process_baseline)

  // Tokens of one step: all ranks together, and this rank's share (its DP rank's: the T ranks of a
  // TP group work on the same sequences).
  std::int64_t tokens_per_step() const { return options.schedule.global_batch * model.seq_len; }
  std::int64_t rank_tokens_per_step() const {
    return std::int64_t(grad_accum) * options.schedule.micro_batch * model.seq_len;
  }
};

// Validates `options` (UsageError naming the option), then builds the job. Collective (the
// communicator's set-up). `options` must outlive the job.
Job set_up_job(const TrainOptions& options);

// Collective over job.comm, after every rank ran its part of a set-up step: `mine` is this rank's
// error (null when its part worked). A rank that failed rethrows its own; while some other rank
// failed, the others throw `elsewhere` as a UsageError when some rank's error was one, else as an
// IoError. So every rank leaves together (none waits in a later collective) with an exit code
// that names the fault's kind, and each failing rank's line says what it met.
void rethrow_together(const Job& job, std::exception_ptr mine, const std::string& elsewhere);

// Collective: replaces the job's strategy with a fresh one, initialised as set_up_job made it (the
// old one is destroyed first). For a resume whose reads went into the state of a checkpoint that
// was then refused, with no older checkpoint to overwrite them: the run starts from step 0 clean.
void rebuild_strategy(Job& job);

// The options' communicator settings (timeout, flight-record folder, all-reduce algorithm, abort on
// a fatal timeout) for a group named `group_name`; the dp group and the summary's yardstick share them.
CommOptions comm_options_for(const TrainOptions& options, const std::string& group_name);

// The MFU basis of the run: the model's training FLOPs per token and the per-rank matmul peak.
// The peak is --peak-gflops, or measured by every rank at once (after a barrier of the job's
// group), so that ranks sharing cores are measured sharing them: the per-rank peak is the
// sustained rate of the slowest rank while all W run their products together (W x repeats x
// 2n^3 FLOPs over the longest rank's seconds, divided by W). MFU is never reported above 1: if
// the achieved rate beats the peak (the cores' other load fell after the measurement, or a given
// peak is too low), MFU is 1 and the summary's "mfu_peak" says the peak was exceeded.
struct MfuBasis {
  double flops_per_token = 0;
  double peak_flop_per_s = 0;  // per rank: --peak-gflops, or measured with every rank at once
  // The device's datasheet dense peak in the run's precision (peak.hpp), where the table knows it.
  std::optional<double> datasheet_peak_flop_per_s;
  bool peak_given = false;         // --peak-gflops
  int ranks_measured_at_once = 0;  // W when measured, 0 when given
  // CPU runs whose peak was measured: the most ranks on one host, its CPUs, and whether some host
  // runs more rank threads (ranks x --threads) than it has CPUs. Unset otherwise.
  std::optional<bool> shared_cores;
  int max_ranks_per_host = 0, host_cpus = 0;
  // CPU runs: the GEMM library every rank uses and why (the summary's "gemm"); unset on cuda.
  std::optional<GemmChoice> gemm;

  // Achieved FLOP/s over the peak of `world` ranks, uncapped.
  double ratio(double tokens_per_s, int world) const {
    return tokens_per_s * flops_per_token / (peak_flop_per_s * world);
  }
  // Model FLOPs utilisation of `tokens_per_s` on `world` ranks (a fraction, at most 1).
  double mfu(double tokens_per_s, int world) const { return std::min(1.0, ratio(tokens_per_s, world)); }
  // The same against the datasheet peak (at most 1); nothing where the datasheet peak is unknown.
  std::optional<double> mfu_datasheet(double tokens_per_s, int world) const {
    if (!datasheet_peak_flop_per_s) return std::nullopt;
    return std::min(1.0, tokens_per_s * flops_per_token / (*datasheet_peak_flop_per_s * world));
  }
  // The summary's "mfu_peak" (docs/FORMATS.md, "Run summary: mfu and mfu_peak").
  MfuPeak peak(double tokens_per_s, int world) const;
};

// CPU runs: chooses the GEMM library (all ranks, cpu_gemm.hpp) before anything is measured with
// it. Measures the peak unless given, and logs (rank 0) the lines that open a run: the model and
// layout, the batch arithmetic and the data, the peak and the FLOPs per token.
MfuBasis announce_job(const Job& job);

}  // namespace shardtrain
