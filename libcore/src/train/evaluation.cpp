#include "shardtrain/train/evaluation.hpp"

#include <algorithm>
#include <filesystem>

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/h5file.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/stats/token_loss.hpp"

namespace shardtrain {

double score_holdout_positions(GptModel& model, const data::TrainingData& data, const std::vector<std::uint64_t>& samples,
                               int max_batch, const HoldoutPositionVisitor& visit) {
  const int T = model.config().seq_len, V = model.config().vocab;
  if (max_batch < 1 || max_batch > model.max_batch())
    throw UsageError("hold-out scoring: batch " + std::to_string(max_batch) + " is not in [1, " +
                     std::to_string(model.max_batch()) + "]");
  const std::size_t batch = std::size_t(max_batch);
  std::vector<std::int32_t> tokens(batch * std::size_t(T + 1));
  double forward_s = 0;
  for (std::size_t first = 0; first < samples.size(); first += batch) {
    const int b = int(std::min(batch, samples.size() - first));
    for (int j = 0; j < b; ++j) data.read_holdout_sample(samples[first + j], tokens.data() + std::size_t(j) * (T + 1));
    const Stopwatch watch;
    model.forward(tokens.data(), b);
    const std::vector<float> logits = model.download_logits();
    forward_s += watch.seconds();
    for (int j = 0; j < b; ++j)
      for (int t = 0; t < T; ++t)
        visit(first + std::size_t(j), t, logits.data() + (std::size_t(j) * T + t) * V,
              tokens[std::size_t(j) * (T + 1) + t + 1]);
  }
  return forward_s;
}

std::optional<HoldoutLoss> evaluate_holdout(GptModel& model, const data::TrainingData& data, int max_samples) {
  const std::vector<std::uint64_t> samples = spread_holdout_samples(data.holdout_slices(), max_samples);
  if (samples.empty()) return std::nullopt;
  const int T = model.config().seq_len, V = model.config().vocab;
  // Per sample, the sum of its positions' losses (in position order); the overall and per-owner
  // figures add those sums in sample order, exactly as release-gate's bootstrap estimate does.
  std::vector<double> sample_loss(samples.size(), 0.0);
  score_holdout_positions(model, data, samples, model.max_batch(), [&](std::size_t i, int, const float* logits, int target) {
    sample_loss[i] += token_loss(logits, V, target);
  });
  double total = 0;
  std::map<std::string, std::pair<double, double>> owners;  // owner -> (loss sum, tokens)
  for (std::size_t i = 0; i < samples.size(); ++i) {
    total += sample_loss[i];
    auto& owner = owners[data.holdout_slices()[data.holdout_slice_of(samples[i])].owner];
    owner.first += sample_loss[i];
    owner.second += T;
  }
  HoldoutLoss h;
  h.tokens = double(samples.size()) * T;
  h.loss = total / h.tokens;
  for (const auto& [name, sums] : owners) h.loss_by_owner[name] = sums.first / sums.second;
  return h;
}

void write_parameters_file(TrainingStrategy& strategy, const std::string& path) {
  // No copy of the model (0.5 GB at GPT-2 small, memory no category of the summary named): each
  // tensor is written from where the strategy hands it over (for_each_full_parameter).
  const std::string tmp = path + ".tmp";
  std::optional<H5File> file;  // opened on the rank the tensors reach (rank 0)
  strategy.for_each_full_parameter([&](const ParameterInfo& t, const float* values) {
    if (!file) file.emplace(tmp, H5File::Mode::kCreate);
    file->write_floats("params/" + t.name, values, t.shape);
  });
  if (!file) return;
  file.reset();
  commit_file_atomically(tmp, path);
}

}  // namespace shardtrain
