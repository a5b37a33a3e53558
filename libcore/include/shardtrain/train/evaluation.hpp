// Hold-out evaluation and the final-parameters file of a training run.
//
// The hold-out is defined once, here and in data/selection.hpp, for every figure called a
// hold-out loss: which samples (data::spread_holdout_samples), how they are run (forwards of a
// fixed number of sequences, the logits downloaded) and how a position is scored
// (stats/token_loss.hpp). The trainer's evaluation (summary.json "holdout_loss") and release-gate
// eval (evaluation.json "scores.loss") both go through score_holdout_positions, so the same
// checkpoint, data, cutoff and sample count give the same loss, bit for bit at the same batch.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

#include "shardtrain/data/selection.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/parallel/strategy.hpp"

namespace shardtrain {

// Called for every scored target position: `sample` indexes the samples vector passed in,
// `position` in [0, seq_len) is target token position + 1 of that sample, `logits` its vocab
// logits and `target` the token. Positions of one sample arrive together, in order.
using HoldoutPositionVisitor = std::function<void(std::size_t sample, int position, const float* logits, int target)>;

// Runs the model over the hold-out samples `samples` (indices into data's hold-out) in forwards of
// `batch` sequences (1 <= batch <= model.max_batch()) and visits every target position. Returns
// the seconds spent in forwards (logits download included).
double score_holdout_positions(GptModel& model, const data::TrainingData& data, const std::vector<std::uint64_t>& samples,
                               int batch, const HoldoutPositionVisitor& visit);

// The trainer's hold-out figures: mean token loss (nats) overall and per owner slice over
// spread_holdout_samples(max_samples), in forwards of model.max_batch() sequences: the sum over
// samples (in order) of each sample's loss sum, over the tokens. Empty when there is no hold-out.
struct HoldoutLoss {
  double loss = 0;                               // nats per token
  double tokens = 0;                             // scored positions
  std::map<std::string, double> loss_by_owner;   // owner -> nats per token
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("holdout_loss", &HoldoutLoss::loss), key("holdout_tokens", &HoldoutLoss::tokens),
                      key("holdout_loss_by_owner", &HoldoutLoss::loss_by_owner)};
  }
  bool operator==(const HoldoutLoss&) const = default;
};
std::optional<HoldoutLoss> evaluate_holdout(GptModel& model, const data::TrainingData& data, int max_samples);

// Collective: rank 0 writes the model's parameters as logical tensors params/<name> (their logical
// shapes) to an HDF5 file, atomically (temporary name + rename): the input equiv-check compares.
// The tensors come from TrainingStrategy::for_each_full_parameter (no whole model beside the state).
void write_parameters_file(TrainingStrategy& strategy, const std::string& path);

}  // namespace shardtrain
