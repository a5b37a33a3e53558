#include "shardtrain/tool/train_cli.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/tool/tool.hpp"
#include "choice_option.hpp"
#include "model_option.hpp"

namespace shardtrain {

namespace {

// The dataset, its cutoff and hold-out, and the model's shape (a named one, fields overriding it).
void add_data_and_shape_options(CLI::App& app, TrainOptions& o, TrainingCli& cli) {
  app.add_option("--data", o.data.path, "Dataset file written by data-prep (HDF5)")->required();
  app.add_option("--cutoff", cli.cutoff, "Use only documents available at or before this RFC 3339 time");
  app.add_option("--eval-from", cli.eval_from, "Hold-out = documents with event time after this (default: --cutoff)");
  app.add_option("--model", cli.model,
                 "A named shape: " + model_preset_names() + " (GPT-2's sizes: vocabulary 50257, context 1024); "
                 "--vocab, --seq-len, --d-model, --layers and --heads given beside it override its fields");
  app.add_option("--vocab", o.model.vocab, "Vocabulary size (0: the dataset's)")->capture_default_str();
  app.add_option("--seq-len", o.model.seq_len, "Context length T")->capture_default_str();
  app.add_option("--d-model", o.model.d_model, "Model width C")->capture_default_str();
  app.add_option("--layers", o.model.n_layer, "Transformer blocks")->capture_default_str();
  app.add_option("--heads", o.model.n_head, "Attention heads (must divide --d-model)")->capture_default_str();
}

// The batch, the step count, AdamW and its learning-rate schedule, the seed.
void add_schedule_and_optimizer_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--global-batch", o.schedule.global_batch, "Sequences per optimizer step, all ranks together")->capture_default_str();
  app.add_option("--micro-batch", o.schedule.micro_batch, "Sequences per forward/backward on one rank")->capture_default_str();
  app.add_option("--steps", o.schedule.steps, "Optimizer steps")->capture_default_str();
  app.add_option("--lr", o.optimizer.max_lr, "Peak learning rate")->capture_default_str();
  app.add_option("--min-lr", o.optimizer.min_lr, "Learning-rate floor after cosine decay")->capture_default_str();
  app.add_option("--warmup", o.optimizer.warmup_steps, "Linear warm-up steps")->capture_default_str();
  app.add_option("--decay-steps", o.optimizer.decay_steps, "Step at which the cosine decay reaches --min-lr (default: --steps)");
  app.add_option("--weight-decay", o.optimizer.weight_decay, "AdamW weight decay (matrices and embeddings)")->capture_default_str();
  app.add_option("--beta1", o.optimizer.beta1, "AdamW beta1")->capture_default_str();
  app.add_option("--beta2", o.optimizer.beta2, "AdamW beta2")->capture_default_str();
  app.add_option("--eps", o.optimizer.eps, "AdamW epsilon")->capture_default_str();
  app.add_option("--grad-clip", o.optimizer.grad_clip, "Global gradient-norm clip (0: off)")->capture_default_str();
  app.add_option("--seed", o.schedule.seed, "Seed of initialisation and sample order")->capture_default_str();
}

// Where the step runs: CPU threads and matrix-product library, the device, its precision, the transport.
void add_device_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--threads", o.parallelism.threads, "CPU threads per rank")->capture_default_str();
  add_choice_option<GemmLibrary>(app, "--gemm", o.parallelism.gemm, choices_of<GemmLibrary>(kGemmLibraryNames),
                                 "CPU matrix-product library: auto (the fastest of those linked, measured at the "
                                 "model's shapes at start; onednn with --deterministic), onednn, openblas or blis");
  add_choice_option<DeviceKind>(app, "--device", o.parallelism.device, choices_of<DeviceKind>(kDeviceKindNames),
                                "cpu or cuda");
  add_choice_option<std::optional<Precision>>(
      app, "--precision", o.parallelism.precision,
      choices_of<std::optional<Precision>>(kPrecisionNames, {{"auto", std::nullopt}}),
      "Matrix-product precision: auto (bf16 on cuda, fp32 on cpu), bf16 (cuda only: bf16 operands, fp32 "
      "accumulation, fp32 master weights and optimizer state) or fp32");
  add_choice_option<Transport>(app, "--transport", o.parallelism.transport, choices_of<Transport>(kTransportNames),
                               "Data-parallel transport: auto (nccl on cuda when every rank has its own GPU, else "
                               "mpi), mpi (on cuda: host staging, ranks may share a GPU) or nccl (cuda only)");
}

// What the run writes and prints: its folder, step lines, hold-out evaluation, the MFU denominator.
void add_output_options(CLI::App& app, TrainOptions& o, TrainingCli& cli) {
  app.add_option("--run-dir", o.run_dir, "Folder for the step log and summary (created)")->capture_default_str();
  app.add_option("--log-every", o.telemetry.log_every, "Print a step line every N steps")->capture_default_str();
  app.add_option("--eval-every", o.evaluation.every, "Hold-out evaluation every N steps (0: at the end only)")->capture_default_str();
  app.add_option("--eval-samples", o.evaluation.samples, "Hold-out samples per evaluation")->capture_default_str();
  app.add_option("--peak-gflops", cli.peak_gflop_per_s, "MFU denominator in GFLOP/s per rank (default: measured at start)");
}

// How the ranks share the work: exact sums, tensor parallelism, buckets and the all-reduce's algorithm.
void add_parallelism_options(CLI::App& app, TrainOptions& o, TrainingCli& cli) {
  app.add_flag("--deterministic", o.parallelism.deterministic, "Exact order-independent gradient sums: results bitwise independent of the rank count and grad_accum");
  app.add_option("--tp", o.parallelism.tp, "Tensor-parallel degree T: W = DP x T ranks, the T ranks of a group adjacent (must divide the heads, 4 x d-model and W)")->capture_default_str();
  app.add_option("--bucket-mb", o.parallelism.bucket_mb, "Gradient bucket size for the overlapped all-reduce (MiB)")->capture_default_str();
  add_choice_option<AllReduceAlgorithm>(app, "--allreduce", o.parallelism.allreduce,
                                        choices_of<AllReduceAlgorithm>(kAllReduceAlgorithmNames),
                                        "Data-parallel all-reduce: halving (point-to-point halving/doubling), mpi "
                                        "(MPI_Iallreduce), auto (halving on power-of-two ranks), or hierarchical "
                                        "(reduce-scatter in the node, all-reduce across nodes, all-gather in the node; "
                                        "nodes from host names or SHARDTRAIN_NODE_OF_RANK=a,a,b,b; flat on one node)");
  app.add_option("--hierarchical-chunk", o.parallelism.hierarchical_chunk_bytes,
                 "Hierarchical all-reduce (--allreduce hierarchical, or auto with --step-model): pipeline each bucket "
                 "in chunks of about BYTES (at most 8), one chunk's node stages overlapping another's crossing "
                 "(0: one piece)")
      ->capture_default_str();
  app.add_option("--step-model", cli.step_model,
                 "With --allreduce auto: a step model with intra- and inter-node links (scale-bench fit on a sweep "
                 "across nodes); each collective goes hierarchical from the size at which the model prices the two "
                 "levels cheaper than flat on the job's nodes, flat below");
}

// What watches the job: the collective timeout, the replica check, the single-rank baseline.
void add_job_health_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--collective-timeout", o.telemetry.collective_timeout_s, "Seconds before a stuck collective dumps its flight record and exits 4")->capture_default_str();
  app.add_option("--check-replicas", o.telemetry.check_replicas, "Compare parameter hashes across ranks every N steps (0: off)")->capture_default_str();
  app.add_option("--baseline", o.telemetry.baseline_summary, "A 1-rank run's summary.json: report speedup and scaling efficiency");
}

// Checkpoints: where, how often, how many, in the background, and what a resume may accept.
void add_checkpoint_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--ckpt-dir", o.checkpoint.dir, "Checkpoint folder (default: RUN_DIR/checkpoints)");
  app.add_option("--ckpt-every", o.checkpoint.every, "Save a checkpoint every N steps and after the last (0: only on SIGTERM/SIGUSR1)")->capture_default_str();
  app.add_option("--keep", o.checkpoint.keep, "Keep the newest K checkpoints (never deleting the newest valid)")->capture_default_str();
  app.add_flag("--async-ckpt", o.checkpoint.async, "Write checkpoints from a background thread after a host snapshot");
  app.add_option("--resume", o.checkpoint.resume, "auto (newest valid checkpoint, else start fresh) or a step_N folder");
  app.add_flag("--allow-data-change", o.checkpoint.allow_data_change, "Resume even if the data selection's snapshot id changed");
  app.add_flag("--fine-tune", o.checkpoint.fine_tune, "With --resume: start a new run from the checkpoint's weights (step 0, "
                                           "fresh sampler and LR schedule; any data, batch and seed); implied for a "
                                           "checkpoint of ckpt-reshard --import");
}

// Stragglers, fault injection for the tests, and the flight recorder's depth.
void add_diagnosis_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--straggler-threshold", o.telemetry.straggler_threshold, "A straggler score below this names a straggler, in (0, 1]")->capture_default_str();
  app.add_option("--straggler-window", o.telemetry.straggler_window, "Steps per window of the individual straggler score (>= 2)")->capture_default_str();
  app.add_option("--inject", o.inject,
                 "Fault injection for tests (repeatable): skip-collective:rank=R,step=S[,phase=P][,group=G], "
                 "wrong-count:rank=R,step=S[,phase=P][,group=G], hang:rank=R,step=S[,phase=P], "
                 "kill:rank=R,step=S[,phase=P], delay:rank=R|all,ms=M[,phase=P], slow-data:rank=R,ms=M");
  app.add_option("--flight-entries", o.telemetry.flight_entries,
                 "Flight-recorder entries kept per communicator group; 0 turns the recorder and the phase history off "
                 "(to measure their cost; hang-diagnose then has nothing to read)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace

void add_training_options(CLI::App& app, TrainOptions& o, TrainingCli& cli) {
  // In this order in --help.
  add_data_and_shape_options(app, o, cli);
  add_schedule_and_optimizer_options(app, o);
  add_device_options(app, o);
  add_output_options(app, o, cli);
  add_parallelism_options(app, o, cli);
  add_job_health_options(app, o);
  add_checkpoint_options(app, o);
  add_diagnosis_options(app, o);
  add_metrics_options(app, o.telemetry);
  o.optimizer.decay_steps = -1;  // "default: --steps", resolved in finish_training_options
}

// The live Prometheus endpoint and the TensorBoard event files (issue 49), a block of their own.
void add_metrics_options(CLI::App& app, TelemetryOptions& t) {
  app.add_option("--metrics-port", t.metrics_port,
                 "Serve Prometheus metrics at http://BIND:PORT/metrics, rank r on PORT + its local rank, and write "
                 "RUN_DIR/prometheus-targets.json for file-based discovery (0: off)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--metrics-bind", t.metrics_bind,
                 "Address the metrics endpoints bind (0.0.0.0: every interface, targets named by host)")
      ->capture_default_str();
  app.add_flag_callback("--no-tensorboard", [&t] { t.tensorboard = false; },
                        "Write no TensorBoard event files (default: every rank writes its step scalars to "
                        "RUN_DIR/tensorboard/rank_<R>/events.out.tfevents.*; a resumed run drops the steps from "
                        "its first step on before writing them again)");
}

int run_training_tool(CLI::App& app, TrainOptions& o, const TrainingCli& cli, int argc, char** argv) {
  ToolOptions options;
  options.needs_mpi = true;
  return run_tool(app, argc, argv, options, [&] {
    apply_model_preset(app, cli.model, o.model);
    finish_training_options(o, cli);
    run_training(o);
    return 0;
  });
}

void finish_training_options(TrainOptions& o, const TrainingCli& cli) {
  if (!cli.cutoff.empty()) o.data.cutoff = cli.cutoff;
  if (!cli.eval_from.empty()) o.data.eval_from = cli.eval_from;
  if (o.optimizer.decay_steps < 0) o.optimizer.decay_steps = std::max(int(o.schedule.steps), o.optimizer.warmup_steps);
  o.telemetry.peak_flop_per_s = cli.peak_gflop_per_s * 1e9;
  if (!cli.step_model.empty()) choose_hierarchy_by_model(o.parallelism, cli.step_model);
  // A chunk size only the hierarchical all-reduce reads: refused where nothing would read it, so
  // a user does not believe a flat run pipelined.
  const bool hierarchical = o.parallelism.allreduce == AllReduceAlgorithm::kHierarchical || o.parallelism.hierarchy_model;
  if (o.parallelism.hierarchical_chunk_bytes > 0 && !hierarchical)
    throw UsageError("--hierarchical-chunk pipelines the hierarchical all-reduce only: add --allreduce hierarchical "
                     "(or --allreduce auto --step-model FILE), or drop --hierarchical-chunk");
}

void apply_model_preset(const CLI::App& app, const std::string& name, ModelConfig& model) {
  apply_model_option(app, name, model, "or give the shape with --vocab, --seq-len, --d-model, --layers and --heads");
}

void choose_hierarchy_by_model(ParallelismOptions& p, const std::string& path) {
  if (p.allreduce != AllReduceAlgorithm::kAuto)
    throw UsageError("--step-model chooses flat or hierarchical per collective size under --allreduce auto; "
                     "drop --step-model or --allreduce");
  const scaling::StepModel model = scaling::read_step_model(path, "the --step-model step model");
  if (!model.intra.known() || !model.inter.known())
    throw UsageError("--step-model " + path + " has no intra-node and inter-node links: fit it with scale-bench fit "
                     "on a collectives sweep run across nodes");
  p.hierarchy_model = model;
  p.hierarchy_source = "the step model " + path;
}

}  // namespace shardtrain
