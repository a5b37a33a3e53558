// Next-token scoring of one position from its logits, and the calibration summary of many
// positions: top-1/top-5 accuracy, expected calibration error (ECE) with its reliability table,
// and the Brier score. Pure arithmetic on host values; the model and the n-gram baselines both
// feed it (releaseeval/evaluation.hpp).
//
// Definitions (docs/FORMATS.md "Release evaluation" repeats them):
//   p_k = softmax(logits)_k over the V classes, computed in double with the max subtracted.
//   loss       = -ln p_target (nats).
//   confidence = max_k p_k; the prediction is the first index reaching it.
//   top-1      = the prediction is the target; top-5 = fewer than 5 classes rank above the target
//                (rank = #{k: l_k > l_t} + #{k < t: l_k == l_t}, so ties go to the lower index).
//   Brier      = sum_k (p_k - [k == target])^2 = sum_k p_k^2 - 2 p_target + 1, in [0, 2] (the
//                multi-class Brier score of Brier 1950, not divided by V).
//   ECE        = sum_b (n_b / N) |accuracy_b - mean confidence_b| over `bins` equal-width bins of
//                the confidence on [0, 1]; bin b holds confidences in [b/bins, (b+1)/bins), the last
//                bin also 1.0 (index min(bins - 1, floor(confidence * bins))). Accuracy is top-1.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "shardtrain/base/json_record.hpp"

namespace shardtrain {

// The scores of one predicted position.
struct PositionScore {
  double loss = 0;        // nats
  double confidence = 0;  // max probability
  double p_target = 0;    // probability of the target
  double brier = 0;       // sum_k (p_k - y_k)^2
  bool top1 = false;
  bool top5 = false;
};

// Scores one position from its `vocab` logits (float, any scale) and the target index in [0, vocab).
PositionScore score_logits(const float* logits, int vocab, int target);
// The same from probabilities that sum to 1 (the n-gram baselines): loss = -ln p[target].
PositionScore score_probabilities(const double* probabilities, int vocab, int target);

// One confidence bin of the reliability table: [lower, upper), its positions, and their mean
// confidence and top-1 accuracy (nothing in an empty bin: null in JSON).
struct ReliabilityBin {
  double lower = 0, upper = 0;
  std::uint64_t count = 0;
  std::optional<double> mean_confidence, accuracy;
  bool operator==(const ReliabilityBin&) const = default;
  static auto fields() {
    using namespace json_fields;
    using B = ReliabilityBin;
    return std::tuple{key("lower", &B::lower), key("upper", &B::upper), key("count", &B::count),
                      key("mean_confidence", &B::mean_confidence, kMayBeAbsent), key("accuracy", &B::accuracy, kMayBeAbsent)};
  }
};

// The calibration figures of the positions scored (fractions in [0, 1], Brier in [0, 2]).
struct CalibrationSummary {
  int bins = 0;
  std::uint64_t positions = 0;
  double ece = 0, brier = 0, top1_accuracy = 0, top5_accuracy = 0;
  std::vector<ReliabilityBin> reliability;  // `bins` bins, lowest confidence first
  bool operator==(const CalibrationSummary&) const = default;
  static auto fields() {
    using namespace json_fields;
    using C = CalibrationSummary;
    return std::tuple{key("bins", &C::bins), key("positions", &C::positions), key("ece", &C::ece), key("brier", &C::brier),
                      key("top1_accuracy", &C::top1_accuracy), key("top5_accuracy", &C::top5_accuracy),
                      key("reliability", &C::reliability)};
  }
};

// Accumulates positions; summary() turns them into the calibration figures.
class CalibrationAccumulator {
 public:
  static constexpr int kDefaultBins = 15;
  explicit CalibrationAccumulator(int bins = kDefaultBins);
  void add(const PositionScore& score);
  std::uint64_t positions() const { return positions_; }
  double ece() const;
  double brier() const;          // mean over positions
  double top1_accuracy() const;
  double top5_accuracy() const;
  CalibrationSummary summary() const;

 private:
  int bins_;
  std::uint64_t positions_ = 0, top1_ = 0, top5_ = 0;
  double brier_sum_ = 0;
  std::vector<std::uint64_t> count_, correct_;
  std::vector<double> confidence_sum_;
};

}  // namespace shardtrain
