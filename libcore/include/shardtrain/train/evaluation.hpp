// Hold-out evaluation and the final-parameters file of a training run.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/model/gpt.hpp"
#include "shardtrain/data/selection.hpp"

namespace shardtrain {

// Mean token loss (nats) on the temporal hold-out, overall and per owner slice: up to
// `max_samples` samples spread evenly over the slices (each slice's first samples), in
// micro-batches of one slice each. {"holdout_loss", "holdout_tokens", "holdout_loss_by_owner"};
// null when the selection has no hold-out.
nlohmann::json evaluate_holdout(GptModel& model, const data::TrainingData& data, int max_samples);

// Writes the model's parameters as logical tensors params/<name> (their logical shapes) to an
// HDF5 file, atomically (temporary name + rename): the input equiv-check compares.
void write_parameters_file(const GptModel& model, const std::string& path);

}  // namespace shardtrain
