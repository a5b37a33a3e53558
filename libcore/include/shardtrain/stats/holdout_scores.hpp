// The figures of a hold-out evaluation, from scored positions (calibration.hpp): the mean loss and
// perplexity, per-slice losses (by owner and by document version) with counts and bootstrap
// intervals (bootstrap.hpp), the calibration summary, the worst slice and the slices worse than the
// overall mean beyond their interval. Independent of what produced the scores (a checkpoint or an
// n-gram baseline: releaseeval/evaluation.hpp), so both are summarised identically and compare.
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
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "shardtrain/base/json_record.hpp"
#include "shardtrain/stats/calibration.hpp"

namespace shardtrain {

struct BootstrapSettings {
  int resamples = 1000;
  std::uint64_t seed = 1;
  double level = 0.95;
};

// One slice's figures: the token-weighted mean loss over its units with its bootstrap interval.
struct SliceScore {
  std::string key, kind, name;    // key = kind + "=" + name ("owner=alice", "version=2")
  double loss = 0, perplexity = 0;  // nats/token; exp(loss)
  double tokens = 0;                // scored positions whose target is in the slice
  std::uint64_t units = 0;          // bootstrap units (sequence parts)
  double lower = 0, upper = 0;      // the interval of `loss`
  bool operator==(const SliceScore&) const = default;
  static auto fields() {  // jf::key: the member `key` hides json_fields::key
    namespace jf = json_fields;
    using S = SliceScore;
    return std::tuple{jf::key("key", &S::key),     jf::key("kind", &S::kind),   jf::key("name", &S::name),
                      jf::key("loss", &S::loss),   jf::key("perplexity", &S::perplexity), jf::key("tokens", &S::tokens),
                      jf::key("units", &S::units), jf::key("lower", &S::lower), jf::key("upper", &S::upper)};
  }
};

// The overall loss's percentile interval and the bootstrap that made it.
struct LossInterval {
  double lower = 0, upper = 0, level = 0.95;
  int resamples = 0;
  std::uint64_t seed = 0;  // the settings' seed (each interval XORs its own key into it)
  bool operator==(const LossInterval&) const = default;
  static auto fields() {
    using namespace json_fields;
    using I = LossInterval;
    return std::tuple{key("lower", &I::lower), key("upper", &I::upper), key("level", &I::level),
                      key("resamples", &I::resamples), key("seed", &I::seed)};
  }
};

// The overall bootstrap's units in arrival order (one per hold-out sequence): two evaluations of the
// same hold-out list the same sequences and token counts, so their losses pair up position for
// position (decision/utility.hpp resamples the paired differences).
struct PerSequenceLosses {
  std::vector<std::uint64_t> sequence;  // hold-out sequence index of each unit
  std::vector<double> loss_sums;        // nats
  std::vector<double> tokens;           // scored positions
  bool operator==(const PerSequenceLosses&) const = default;
  static auto fields() {
    using namespace json_fields;
    using P = PerSequenceLosses;
    return std::tuple{key("sequence", &P::sequence), key("loss_sums", &P::loss_sums), key("tokens", &P::tokens)};
  }
};

// HoldoutScores::summary: what an evaluation's "scores" holds.
struct HoldoutSummary {
  double loss = 0, perplexity = 0;  // nats/token over every scored position; exp(loss)
  double tokens = 0;                // scored positions
  std::uint64_t sequences = 0;
  LossInterval interval;
  CalibrationSummary calibration;
  std::vector<SliceScore> slices;   // owners then versions, each sorted by name
  std::string worst_slice;          // the key of the slice with the highest loss
  std::vector<std::string> slices_worse_than_mean;  // keys whose lower bound exceeds `loss`
  // Absent in evaluations recorded before the utility (release records of format_version 1).
  std::optional<PerSequenceLosses> per_sequence;
  bool operator==(const HoldoutSummary&) const = default;
  static auto fields() {
    using namespace json_fields;
    using H = HoldoutSummary;
    return std::tuple{key("loss", &H::loss), key("perplexity", &H::perplexity), key("tokens", &H::tokens),
                      key("sequences", &H::sequences), key("interval", &H::interval),
                      key("calibration", &H::calibration), key("slices", &H::slices), key("worst_slice", &H::worst_slice),
                      key("slices_worse_than_mean", &H::slices_worse_than_mean),
                      key("per_sequence", &H::per_sequence, kOmittedWhenEmpty)};
  }
  // The list's write and read, for callers that name the type's pair (the release records).
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static HoldoutSummary from_json(const JsonFile& file, const std::string& at) { return json_fields::read<HoldoutSummary>(file, at); }
};

class HoldoutScores {
 public:
  explicit HoldoutScores(int calibration_bins = CalibrationAccumulator::kDefaultBins);
  // One scored position of hold-out sequence `sequence` (positions of one sequence arrive together).
  void add(const PositionScore& score, std::uint64_t sequence, const std::string& owner, std::int64_t version);
  std::uint64_t positions() const { return calibration_.positions(); }

  // The figures above, per_sequence always set. Throws UsageError when nothing was added.
  HoldoutSummary summary(const BootstrapSettings& bootstrap) const;

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
