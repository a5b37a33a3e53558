// The training job behind ddp-train: data selection and loading, the model on a backend, the
// step loop with per-step lines, the JSONL step log, periodic hold-out evaluation, and the run
// summary. One rank in this version; the data-parallel layer slots in between backward and the
// optimizer (StepRunner).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/model_config.hpp"
#include "shardtrain/optim.hpp"

namespace shardtrain {

struct TrainOptions {
  // Data (a dataset written by data-prep) and its selection.
  std::string data_path;
  std::optional<std::string> cutoff;     // RFC 3339: only documents available by then
  std::optional<std::string> eval_from;  // RFC 3339: hold-out = documents with later event time
  // Model: vocab 0 takes the dataset's vocabulary.
  ModelConfig model;
  OptimizerConfig optimizer;
  // Batch (contract 1): global_batch = micro_batch x grad_accum x dp_size sequences.
  std::int64_t global_batch = 8;
  int micro_batch = 8;
  std::int64_t steps = 100;
  std::uint64_t seed = 1;        // initialisation and sample order
  int threads = 1;               // CPU threads per rank
  std::string device = "cpu";    // cpu | cuda
  std::string run_dir = "run";   // step log and summary go here (created)
  int log_every = 1;             // print a step line every N steps (and the last)
  int eval_every = 0;            // hold-out evaluation every N steps (0: only at the end)
  int eval_samples = 64;         // hold-out samples per evaluation (spread over owner slices)
  double peak_flops = 0;         // MFU denominator; 0 measures the backend's matmul peak at start
};

// Runs the job; returns the summary JSON that was also written to run_dir/summary.json.
// Throws shardtrain::Error subclasses on bad options, data or I/O.
nlohmann::json run_training(const TrainOptions& options);

}  // namespace shardtrain
