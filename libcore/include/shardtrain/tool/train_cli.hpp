// The command-line options every trainer tool shares (ddp-train, fsdp-train): one definition,
// so the tools, their --help and their man pages cannot drift apart.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "shardtrain/train/trainer.hpp"

namespace shardtrain {

// Raw values that need a conversion after parsing (finish_training_options).
struct TrainingCli {
  std::string cutoff, eval_from;
  double peak_gflop_per_s = 0;  // --peak-gflops, GFLOP/s per rank -> TelemetryOptions::peak_flop_per_s
  std::string step_model;       // --step-model FILE (scale-bench fit) -> ParallelismOptions::hierarchy_model
  std::string model;            // --model NAME (kModelPresets) -> TrainOptions::model, under the explicit options
};

// Adds the shared training options, bound to `o` and `cli`. The options that stand for enums
// (--device, --precision, --transport, --allreduce) are parsed into them here; an unknown name is
// a parse error naming the option and its allowed values.
void add_training_options(CLI::App& app, TrainOptions& o, TrainingCli& cli);
// The live metrics' options (--metrics-port, --metrics-bind) and --no-tensorboard; add_training_options adds them.
void add_metrics_options(CLI::App& app, TelemetryOptions& t);
// After parsing: optional times, the decay horizon default (max(--steps, --warmup)), units, and
// --step-model read into the size thresholds of --allreduce auto (UsageError naming the file, or the
// option when --allreduce is not auto or the model lacks the intra- and inter-node links).
void finish_training_options(TrainOptions& o, const TrainingCli& cli);
// --step-model FILE: the model whose two links set the thresholds of --allreduce auto (the trainer
// prices them with scaling::hierarchical_thresholds on the job's N x L nodes). Exposed for the tests.
void choose_hierarchy_by_model(ParallelismOptions& p, const std::string& path);
// --model NAME: the preset's shape in every field of `model` whose own option (--vocab, --seq-len,
// --d-model, --layers, --heads) was not given on `app`'s command line, so explicit options override
// the preset. Nothing when `name` is empty; UsageError for an unknown name.
void apply_model_preset(const CLI::App& app, const std::string& name, ModelConfig& model);
// The trainer tools' main once their options are declared: parses under MPI, finishes the
// options and trains (run_tool's exit codes).
int run_training_tool(CLI::App& app, TrainOptions& o, const TrainingCli& cli, int argc, char** argv);

}  // namespace shardtrain
