// The figures of a hold-out evaluation, from scored positions (calibration.hpp): the mean loss and
// perplexity, per-slice losses (by owner and by document version) with counts and bootstrap
// intervals (bootstrap.hpp), the calibration summary, the worst slice and the slices worse than the
// overall mean beyond their interval. Independent of what produced the scores (a checkpoint or an
// n-gram baseline: release/evaluation.hpp), so both are summarised identically and compare.
//
// Slices: "owner=<name>" and "version=<n>" for the document each scored position's *target* token
// belongs to. The bootstrap unit of a slice is the part of one hold-out sequence that falls in the
// slice (see bootstrap.hpp for why sequences); the unit of the overall figure is the sequence. Each
// slice's interval uses seed XOR fnv1a64(key), the overall one seed XOR fnv1a64("all"), so adding a
// slice never changes another's interval. A slice is "worse than the mean beyond its interval" when
// its lower bound exceeds the overall mean loss.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/release/calibration.hpp"

namespace shardtrain {

struct BootstrapSettings {
  int resamples = 1000;
  std::uint64_t seed = 1;
  double level = 0.95;
};

class HoldoutScores {
 public:
  explicit HoldoutScores(int calibration_bins = CalibrationAccumulator::kDefaultBins);
  // One scored position of hold-out sequence `sequence` (positions of one sequence arrive together).
  void add(const PositionScore& score, std::uint64_t sequence, const std::string& owner, std::int64_t version);
  std::uint64_t positions() const { return calibration_.positions(); }

  // {"loss", "perplexity", "tokens", "sequences", "interval": {"lower","upper","level","resamples","seed"},
  //  "calibration": CalibrationAccumulator::summary(), "slices": [{"key","kind","name","loss","perplexity",
  //  "tokens","units","lower","upper"}] (owners then versions, each sorted), "worst_slice": key,
  //  "slices_worse_than_mean": [key...], "per_sequence": {"sequence": [id...], "loss_sums": [nats...],
  //  "tokens": [count...]}} (the overall bootstrap's units in arrival order: two evaluations of the same
  //  hold-out list the same sequences and token counts, so their losses pair up position for position;
  //  release/utility.hpp resamples the paired differences). Throws UsageError when nothing was added.
  nlohmann::json summary(const BootstrapSettings& bootstrap) const;

 private:
  struct Units {  // one bootstrap unit per (sequence, slice)
    std::vector<double> loss_sums, tokens;
    std::vector<std::uint64_t> sequences;  // the sequence of each unit
    std::uint64_t last_sequence = UINT64_MAX;
    void add(std::uint64_t sequence, double loss);
  };
  CalibrationAccumulator calibration_;
  Units all_;
  std::map<std::string, Units> owners_, versions_;
};

}  // namespace shardtrain
