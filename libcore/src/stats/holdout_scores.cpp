#include "shardtrain/stats/holdout_scores.hpp"

#include <cmath>
#include <numeric>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/stats/bootstrap.hpp"

namespace shardtrain {
namespace {

SliceScore slice_score(const std::string& kind, const std::string& name, const std::vector<double>& loss_sums,
                       const std::vector<double>& tokens, const BootstrapSettings& b) {
  SliceScore s;
  s.key = kind + "=" + name;
  s.kind = kind;
  s.name = name;
  const BootstrapInterval i = bootstrap_ratio_interval(loss_sums, tokens, b.resamples, b.seed ^ fnv1a64(s.key), b.level);
  s.loss = i.estimate;
  s.perplexity = std::exp(i.estimate);
  s.tokens = std::accumulate(tokens.begin(), tokens.end(), 0.0);
  s.units = loss_sums.size();
  s.lower = i.lower;
  s.upper = i.upper;
  return s;
}

}  // namespace

void HoldoutScores::Units::add(std::uint64_t sequence, double loss) {
  if (sequence != last_sequence || loss_sums.empty()) {
    loss_sums.push_back(0);
    tokens.push_back(0);
    sequences.push_back(sequence);
    last_sequence = sequence;
  }
  loss_sums.back() += loss;
  tokens.back() += 1;
}

HoldoutScores::HoldoutScores(int calibration_bins) : calibration_(calibration_bins) {}

void HoldoutScores::add(const PositionScore& score, std::uint64_t sequence, const std::string& owner,
                        std::int64_t version) {
  calibration_.add(score);
  all_.add(sequence, score.loss);
  owners_[owner].add(sequence, score.loss);
  versions_[std::to_string(version)].add(sequence, score.loss);
}

HoldoutSummary HoldoutScores::summary(const BootstrapSettings& b) const {
  if (all_.loss_sums.empty()) throw UsageError("hold-out evaluation: no position was scored (empty hold-out?)");
  const BootstrapInterval overall =
      bootstrap_ratio_interval(all_.loss_sums, all_.tokens, b.resamples, b.seed ^ fnv1a64("all"), b.level);
  HoldoutSummary h;
  for (const auto& [name, u] : owners_) h.slices.push_back(slice_score("owner", name, u.loss_sums, u.tokens, b));
  for (const auto& [name, u] : versions_) h.slices.push_back(slice_score("version", name, u.loss_sums, u.tokens, b));
  double worst_loss = -1;
  for (const auto& s : h.slices) {
    if (s.loss > worst_loss) worst_loss = s.loss, h.worst_slice = s.key;
    if (s.lower > overall.estimate) h.slices_worse_than_mean.push_back(s.key);
  }
  h.loss = overall.estimate;
  h.perplexity = std::exp(overall.estimate);
  h.tokens = double(calibration_.positions());
  h.sequences = all_.loss_sums.size();
  h.interval = {overall.lower, overall.upper, b.level, b.resamples, b.seed};
  h.calibration = calibration_.summary();
  h.per_sequence = PerSequenceLosses{all_.sequences, all_.loss_sums, all_.tokens};
  return h;
}

}  // namespace shardtrain
