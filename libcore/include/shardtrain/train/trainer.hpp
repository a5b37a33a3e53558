// The training job behind ddp-train and fsdp-train: data selection and loading, the model on a
// backend, data parallelism over the MPI ranks (strategy.hpp: DDP's bucketed all-reduce overlapped
// with backward or deterministic mode's exact sums, or a ZeRO stage), the step loop with per-step
// lines, per-rank JSONL step logs, periodic hold-out evaluation, replica checks, checkpoints and
// resume, and the run summary (rank 0). It runs as phases -- set-up, resume, step loop (with
// evaluation), finish -- one private file each under libcore/src/train/ (trainer.cpp lists them).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/cpu_gemm.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/optim.hpp"
#include "shardtrain/parallel/layout_plan.hpp"
#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/train/run_summary.hpp"

namespace shardtrain {

// The data-parallel group's transport (--transport).
//   kAuto: NCCL on cuda when the build has it and every rank of a node has a GPU of its own, else MPI.
//   kMpi:  MPI; on cuda, device buffers are staged through host memory, so W ranks can share one GPU.
//   kNccl: NCCL (cuda only).
enum class Transport { kAuto, kMpi, kNccl };
// The one table of its names (--transport), in the order messages and --help list them.
inline constexpr std::pair<const char*, Transport> kTransportNames[] = {
    {"auto", Transport::kAuto}, {"mpi", Transport::kMpi}, {"nccl", Transport::kNccl}};

// The dataset (written by data-prep) and its selection.
struct DataOptions {
  std::string path;
  std::optional<std::string> cutoff;     // RFC 3339: only documents available by then
  std::optional<std::string> eval_from;  // RFC 3339: hold-out = documents with later event time
};

// How much is trained, in what batches, from which seed. Contract 1 of docs/ARCHITECTURE.md:
// global_batch = micro_batch x grad_accum x dp_size sequences.
struct ScheduleOptions {
  std::int64_t global_batch = 8;
  int micro_batch = 8;
  std::int64_t steps = 100;
  std::uint64_t seed = 1;  // initialisation and sample order
};

// Where and how the ranks compute and communicate. All ranks of MPI_COMM_WORLD form the job;
// W = DP x T ranks.
struct ParallelismOptions {
  DeviceKind device = DeviceKind::kCpu;
  int threads = 1;  // CPU threads per rank
  // The CPU backend's GEMM library (--gemm, cpu_gemm.hpp): auto measures the linked ones at the
  // model's shapes at start and takes the fastest (oneDNN in deterministic mode); cpu only.
  GemmLibrary gemm = GemmLibrary::kAuto;
  // Matrix-product precision (backend.hpp Precision); unset is "auto": bf16 on cuda, fp32 on cpu.
  // bf16 is cuda only (the CPU backend computes in fp32, and a cpu run asking for bf16 is refused).
  // Parameters, gradients (reduced in fp32), AdamW moments and checkpoints are fp32 in every
  // precision, so a checkpoint of one precision resumes in the other.
  std::optional<Precision> precision;
  Transport transport = Transport::kAuto;
  bool deterministic = false;  // exact gradient sums (exact_sum.hpp): bitwise independent of W and grad_accum
  int zero_stage = 0;          // 0: DDP (full replicas); 1, 2, 3: ZeRO (strategy.hpp)
  int tp = 1;                  // tensor-parallel degree T: W = DP x T ranks, TP ranks adjacent
  bool reshard_after_forward = true;  // ZeRO-3: free a gathered unit after its forward
  double memory_budget = 0;    // bytes per rank (0: none); over it, refuse before training (zero.hpp)
  double bucket_mb = 4.0;      // gradient bucket size for the overlapped all-reduce (MiB)
  AllReduceAlgorithm allreduce = AllReduceAlgorithm::kAuto;  // fast-mode all-reduce (communicator.hpp)
  // --allreduce auto with a step model (--step-model, with both links known): on the DP group's
  // placement (uniform nodes: N nodes x L ranks) each operation goes hierarchical from the size
  // the model prices cheaper on two levels (stepmodel/two_level.hpp, hierarchical_thresholds).
  // None: auto stays flat, as without a model.
  std::optional<scaling::StepModel> hierarchy_model;
  std::string hierarchy_source;  // where hierarchy_model came from, for the log ("the step model FILE")
  // A hierarchical all-reduce pipelined in chunks of about this many bytes (HierarchyOptions::
  // pipeline_chunk_bytes, --hierarchical-chunk); 0: each bucket in one piece.
  std::uint64_t hierarchical_chunk_bytes = 0;
};

// Checkpoints (contract 5; ckpt.hpp). A SIGTERM or SIGUSR1 (what Slurm sends before a time limit)
// makes every rank save at the next step boundary and stop cleanly.
struct CheckpointOptions {
  std::string dir;       // "" -> <run_dir>/checkpoints
  int every = 0;         // save every N steps and after the last; 0: only on a signal
  int keep = 3;          // keep the newest K checkpoints (never deleting the newest valid)
  bool async = false;    // snapshot to host memory, write from a background thread
  std::string resume;    // "" (fresh), "auto" (newest valid in dir, else fresh) or a folder
  bool allow_data_change = false;  // resume even if the data selection's snapshot id changed
  // Start a new training from the checkpoint's weights (and its AdamW moments as stored: zero in an
  // imported one): step 0, fresh sampler and LR schedule, any data, global batch and seed. Implied
  // for a checkpoint ckpt-reshard --import wrote (manifest extra "imported_from").
  bool fine_tune = false;
};

// The periodic hold-out evaluation.
struct EvaluationOptions {
  int every = 0;     // evaluate every N steps (0: only at the end)
  int samples = 64;  // hold-out samples per evaluation (spread over owner slices)
};

// What the run reports about itself, and the watchdogs that check it as it goes.
struct TelemetryOptions {
  int log_every = 1;            // print a step line every N steps (and the last)
  double peak_flop_per_s = 0;   // MFU denominator (FLOP/s per rank); 0 measures the backend's matmul peak at start
  std::string baseline_summary; // a 1-rank run's summary.json: adds speedup and efficiency E(W)
  int flight_entries = 2048;    // flight-recorder ring per group; 0: recorder and phase history off
  double collective_timeout_s = 300;  // a collective not done by then dumps the flight record, exits 4
  int check_replicas = 0;       // compare parameter hashes across ranks every N steps (0: off)
  // Straggler scores (telemetry/straggler.hpp): live at each progress line and in the summary.
  double straggler_threshold = 0.75;  // a score below it names a straggler; in (0, 1]
  int straggler_window = 10;          // steps per window of the individual score; >= 2
  // The live Prometheus endpoint of every rank (--metrics-port, --metrics-bind; train/live_metrics.hpp):
  // rank r serves on metrics_port + its local rank (telemetry/scrape_targets.hpp), rank 0 writes
  // RUN_DIR/prometheus-targets.json. 0: off.
  int metrics_port = 0;
  std::string metrics_bind = "127.0.0.1";
  // TensorBoard event files of every rank under RUN_DIR/tensorboard (--no-tensorboard: off;
  // libcore/src/train/tensorboard_log.hpp).
  bool tensorboard = true;
};

struct TrainOptions {
  DataOptions data;
  ModelConfig model{0, 256, 256, 4, 4};  // vocab 0 takes the dataset's vocabulary
  OptimizerConfig optimizer;
  ScheduleOptions schedule;
  ParallelismOptions parallelism;
  CheckpointOptions checkpoint;
  EvaluationOptions evaluation;
  TelemetryOptions telemetry;
  std::string run_dir = "run";      // step logs, summary, parameters (and by default checkpoints) go here (created)
  std::string tool = "ddp-train";   // the "tool" field of the summary
  std::vector<std::string> inject;  // fault injection specs (tests): comm/fault_injection.hpp
};

// Runs the job. Returns, on rank 0, the summary also written to run_dir/summary.json; nothing on
// the other ranks, and nothing when a resumed checkpoint is already at or past schedule.steps (no
// step runs and no summary is written). Throws shardtrain::Error subclasses on bad options, data
// or I/O.
std::optional<RunSummary> run_training(const TrainOptions& options);

// Every check of the options alone (UsageError naming the option and its range): the first thing
// run_training does, before it opens a file, a communicator or a device. Pure.
void validate_training_options(const TrainOptions& options);

// The layout the trainers run `options` in on `world` ranks with `model` (options.model with the
// dataset's vocabulary filled in): the layout planner's answer (parallel/layout_plan.hpp) to the
// request run_training's set-up makes, which throws the refusal (LayoutRefused, exit 2) before
// it opens a communicator or a device. Pure.
LayoutDecision plan_training_layout(const TrainOptions& options, const ModelConfig& model, int world);

}  // namespace shardtrain
