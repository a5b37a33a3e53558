#include "shardtrain/stats/holdout_scores.hpp"

#include <cmath>
#include <numeric>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/stats/bootstrap.hpp"
#include "shardtrain/base/json_fields.hpp"

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

nlohmann::json SliceScore::to_json() const {
  return {{"key", key},     {"kind", kind},   {"name", name},   {"loss", loss},  {"perplexity", perplexity},
          {"tokens", tokens}, {"units", units}, {"lower", lower}, {"upper", upper}};
}

SliceScore SliceScore::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  SliceScore s;
  s.key = f.string(field(at, "key"));
  s.kind = f.string(field(at, "kind"));
  s.name = f.string(field(at, "name"));
  s.loss = f.number(field(at, "loss"));
  s.perplexity = f.number(field(at, "perplexity"));
  s.tokens = f.number(field(at, "tokens"));
  s.units = json_fields::count(f, field(at, "units"));
  s.lower = f.number(field(at, "lower"));
  s.upper = f.number(field(at, "upper"));
  return s;
}

nlohmann::json LossInterval::to_json() const {
  return {{"lower", lower}, {"upper", upper}, {"level", level}, {"resamples", resamples}, {"seed", seed}};
}

LossInterval LossInterval::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  LossInterval i;
  i.lower = f.number(field(at, "lower"));
  i.upper = f.number(field(at, "upper"));
  i.level = f.number(field(at, "level"));
  i.resamples = json_fields::small_integer(f, field(at, "resamples"));
  i.seed = json_fields::count(f, field(at, "seed"));
  return i;
}

nlohmann::json PerSequenceLosses::to_json() const {
  return {{"sequence", sequence}, {"loss_sums", loss_sums}, {"tokens", tokens}};
}

PerSequenceLosses PerSequenceLosses::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  return {json_fields::counts(f, field(at, "sequence")), json_fields::numbers(f, field(at, "loss_sums")),
          json_fields::numbers(f, field(at, "tokens"))};
}

nlohmann::json HoldoutSummary::to_json() const {
  nlohmann::json s = nlohmann::json::array();
  for (const auto& slice : slices) s.push_back(slice.to_json());
  nlohmann::json j = {{"loss", loss},
                      {"perplexity", perplexity},
                      {"tokens", tokens},
                      {"sequences", sequences},
                      {"interval", interval.to_json()},
                      {"calibration", calibration.to_json()},
                      {"slices", s},
                      {"worst_slice", worst_slice},
                      {"slices_worse_than_mean", slices_worse_than_mean}};
  if (per_sequence) j["per_sequence"] = per_sequence->to_json();
  return j;
}

HoldoutSummary HoldoutSummary::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  HoldoutSummary h;
  h.loss = f.number(field(at, "loss"));
  h.perplexity = f.number(field(at, "perplexity"));
  h.tokens = f.number(field(at, "tokens"));
  h.sequences = json_fields::count(f, field(at, "sequences"));
  h.interval = LossInterval::from_json(f, field(at, "interval"));
  h.calibration = CalibrationSummary::from_json(f, field(at, "calibration"));
  const std::string slices = field(at, "slices");
  for (std::size_t i = 0, n = json_fields::array_size(f, slices); i < n; ++i)
    h.slices.push_back(SliceScore::from_json(f, field(slices, std::to_string(i))));
  h.worst_slice = f.string(field(at, "worst_slice"));
  h.slices_worse_than_mean = json_fields::strings(f, field(at, "slices_worse_than_mean"));
  if (f.has(field(at, "per_sequence"))) h.per_sequence = PerSequenceLosses::from_json(f, field(at, "per_sequence"));
  return h;
}

}  // namespace shardtrain
