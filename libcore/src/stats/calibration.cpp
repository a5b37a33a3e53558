#include "shardtrain/stats/calibration.hpp"

#include <algorithm>
#include <cmath>

#include "shardtrain/base/error.hpp"
#include "shardtrain/stats/token_loss.hpp"

namespace shardtrain {
namespace {

// Scores from the probabilities p (sum 1) and a ranking key per class (logits, or p itself).
template <typename Key>
PositionScore score_from(const double* p, const Key* key, int vocab, int target) {
  if (target < 0 || target >= vocab)
    throw UsageError("score: target " + std::to_string(target) + " outside the vocabulary of " + std::to_string(vocab));
  PositionScore s;
  int argmax = 0, above = 0;
  double sum_sq = 0;
  for (int k = 0; k < vocab; ++k) {
    if (key[k] > key[argmax]) argmax = k;
    if (key[k] > key[target] || (key[k] == key[target] && k < target)) ++above;
    sum_sq += p[k] * p[k];
  }
  s.p_target = p[target];
  s.confidence = p[argmax];
  s.loss = -std::log(p[target]);
  s.brier = sum_sq - 2 * p[target] + 1;
  s.top1 = argmax == target;
  s.top5 = above < 5;
  return s;
}

}  // namespace

PositionScore score_logits(const float* logits, int vocab, int target) {
  std::vector<double> p(static_cast<std::size_t>(vocab));
  const double m = *std::max_element(logits, logits + vocab);
  double z = 0;
  for (int k = 0; k < vocab; ++k) z += p[std::size_t(k)] = std::exp(double(logits[k]) - m);
  for (auto& v : p) v /= z;
  PositionScore s = score_from(p.data(), logits, vocab, target);
  s.loss = token_loss(logits, vocab, target);  // the hold-out's one loss definition; exact even when p_target underflows
  return s;
}

PositionScore score_probabilities(const double* probabilities, int vocab, int target) {
  return score_from(probabilities, probabilities, vocab, target);
}

CalibrationAccumulator::CalibrationAccumulator(int bins)
    : bins_(bins), count_(std::size_t(bins)), correct_(std::size_t(bins)), confidence_sum_(std::size_t(bins)) {
  if (bins < 1) throw UsageError("calibration: need at least one bin");
}

void CalibrationAccumulator::add(const PositionScore& s) {
  const int b = std::min(bins_ - 1, int(std::floor(s.confidence * bins_)));
  ++count_[std::size_t(b)];
  correct_[std::size_t(b)] += s.top1;
  confidence_sum_[std::size_t(b)] += s.confidence;
  ++positions_;
  top1_ += s.top1;
  top5_ += s.top5;
  brier_sum_ += s.brier;
}

double CalibrationAccumulator::ece() const {
  if (positions_ == 0) return 0;
  double e = 0;
  for (std::size_t b = 0; b < count_.size(); ++b)
    if (count_[b]) e += std::abs(double(correct_[b]) - confidence_sum_[b]) / double(positions_);
  return e;
}

double CalibrationAccumulator::brier() const { return positions_ ? brier_sum_ / double(positions_) : 0; }
double CalibrationAccumulator::top1_accuracy() const { return positions_ ? double(top1_) / double(positions_) : 0; }
double CalibrationAccumulator::top5_accuracy() const { return positions_ ? double(top5_) / double(positions_) : 0; }

CalibrationSummary CalibrationAccumulator::summary() const {
  CalibrationSummary c;
  for (std::size_t b = 0; b < count_.size(); ++b) {
    ReliabilityBin bin;
    bin.lower = double(b) / bins_;
    bin.upper = double(b + 1) / bins_;
    bin.count = count_[b];
    if (count_[b]) {
      bin.mean_confidence = confidence_sum_[b] / double(count_[b]);
      bin.accuracy = double(correct_[b]) / double(count_[b]);
    }
    c.reliability.push_back(bin);
  }
  c.bins = bins_;
  c.positions = positions_;
  c.ece = ece();
  c.brier = brier();
  c.top1_accuracy = top1_accuracy();
  c.top5_accuracy = top5_accuracy();
  return c;
}

}  // namespace shardtrain
