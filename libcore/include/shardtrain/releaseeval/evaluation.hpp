// Release evaluation of a checkpoint, or of an n-gram baseline, on the temporal hold-out: every
// scored position goes through calibration.hpp's scoring into holdout_scores.hpp's summary, so a
// candidate and its baseline are measured by the same code on the same positions.
//
// Hold-out: the selection rules of data/selection.hpp with --cutoff T (eval_from = T): for every
// document id, its newest version with event_time > T, cut into per-owner streams of samples of
// seq_len + 1 tokens. Which samples are scored: with max_samples = 0 all of them; else up to
// max_samples spread over the owner slices (max(1, max_samples / slices) per slice), evenly spaced
// within a slice (sample floor(k * samples / n) for k < n). Every position of a scored sample is
// scored (seq_len targets). A target belongs to the document whose tokens (or the separator
// after them) it is, which gives its owner and version slice.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/data/selection.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"
#include "shardtrain/stats/holdout_scores.hpp"

namespace shardtrain {

struct HoldoutPlan {
  std::string data_path;
  std::string cutoff;   // RFC 3339, required
  int seq_len = 0;      // the model's context length
  int max_samples = 128;
  int calibration_bins = CalibrationAccumulator::kDefaultBins;
  BootstrapSettings bootstrap;
};

struct ReleaseEvalOptions {
  HoldoutPlan holdout;       // holdout.seq_len is taken from the checkpoint
  int batch = 8;             // sequences per forward while scoring
  int threads = 1;           // CPU threads
  int latency_batch = 1;     // sequences per forward in the latency probe
  int latency_runs = 20;     // timed forwards (after one warm-up)
  std::string summary_path;  // the training run's summary.json; "" = <checkpoint>/../../summary.json if present
};

// The step folder a CKPT argument names: a step_<N> folder itself, or a checkpoint folder (or a run
// folder holding checkpoints/) whose `latest` names one. Throws UsageError naming the path.
std::string resolve_checkpoint_folder(const std::string& path);

// Evaluates the checkpoint (validated, checksums verified) on the hold-out: an evaluation of kind
// "checkpoint" (releaseeval/checkpoint_evaluation.hpp), with the training run's figures when its
// summary.json is found.
CheckpointEvaluation evaluate_checkpoint(const std::string& checkpoint, const ReleaseEvalOptions& options);

// n-gram baselines of the training selection (documents available by the cutoff): order 1 (unigram,
// add-one smoothing) or 2 (bigram, P(b|a) = (c(a,b) + alpha P1(b)) / (c(a) + alpha), alpha = 10,
// P1 the unigram), counted over the train stream's samples.
struct NgramModel {
  int order = 1;
  int vocab = 0;
  std::vector<double> probabilities;  // order 1: (V); order 2: (V, V) row a = P(.|a)
  std::uint64_t counted_tokens = 0;
  const double* next(int previous) const {
    return order == 1 ? probabilities.data() : probabilities.data() + std::size_t(previous) * std::size_t(vocab);
  }
};
// The plan's data selection (train stream and hold-out slices), read into memory once: fitting
// and scoring a baseline can share it.
data::TrainingData open_selection(const HoldoutPlan& plan);
// UsageError unless order is 1 or 2.
void check_ngram_order(int order);
NgramModel fit_ngram(const HoldoutPlan& plan, int order);
NgramModel fit_ngram(const HoldoutPlan& plan, const data::TrainingData& selection, int order);
// Scores the n-gram on the hold-out exactly as evaluate_checkpoint does: an evaluation of kind
// "ngram". `selection`: open_selection(plan), when already open.
CheckpointEvaluation evaluate_ngram(const NgramModel& model, const HoldoutPlan& plan);
CheckpointEvaluation evaluate_ngram(const NgramModel& model, const HoldoutPlan& plan, data::TrainingData selection);
// The model as HDF5 (/ngram/probabilities, attributes through its shape), written atomically.
void write_ngram_file(const NgramModel& model, const std::string& path);
// The model write_ngram_file wrote (its probabilities as stored: float). Throws IoError for an
// unreadable file, UsageError naming it for a shape that is not an order-1 (V) or order-2 (V, V) model.
NgramModel read_ngram_file(const std::string& path);

}  // namespace shardtrain
