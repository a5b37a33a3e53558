#include "shardtrain/release/holdout_scores.hpp"

#include <cmath>
#include <numeric>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/release/bootstrap.hpp"

namespace shardtrain {
namespace {

nlohmann::json slice_json(const std::string& kind, const std::string& name, const std::vector<double>& loss_sums,
                          const std::vector<double>& tokens, const BootstrapSettings& b) {
  const std::string key = kind + "=" + name;
  const BootstrapInterval i = bootstrap_ratio_interval(loss_sums, tokens, b.resamples, b.seed ^ fnv1a64(key), b.level);
  return {{"key", key},
          {"kind", kind},
          {"name", name},
          {"loss", i.estimate},
          {"perplexity", std::exp(i.estimate)},
          {"tokens", std::accumulate(tokens.begin(), tokens.end(), 0.0)},
          {"units", loss_sums.size()},
          {"lower", i.lower},
          {"upper", i.upper}};
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

nlohmann::json HoldoutScores::summary(const BootstrapSettings& b) const {
  if (all_.loss_sums.empty()) throw UsageError("hold-out evaluation: no position was scored (empty hold-out?)");
  const BootstrapInterval overall =
      bootstrap_ratio_interval(all_.loss_sums, all_.tokens, b.resamples, b.seed ^ fnv1a64("all"), b.level);
  nlohmann::json slices = nlohmann::json::array();
  for (const auto& [name, u] : owners_) slices.push_back(slice_json("owner", name, u.loss_sums, u.tokens, b));
  for (const auto& [name, u] : versions_) slices.push_back(slice_json("version", name, u.loss_sums, u.tokens, b));
  std::string worst;
  double worst_loss = -1;
  nlohmann::json worse = nlohmann::json::array();
  for (const auto& s : slices) {
    if (s["loss"].get<double>() > worst_loss) worst_loss = s["loss"].get<double>(), worst = s["key"];
    if (s["lower"].get<double>() > overall.estimate) worse.push_back(s["key"]);
  }
  return {{"loss", overall.estimate},
          {"perplexity", std::exp(overall.estimate)},
          {"tokens", double(calibration_.positions())},
          {"sequences", all_.loss_sums.size()},
          {"interval",
           {{"lower", overall.lower}, {"upper", overall.upper}, {"level", b.level}, {"resamples", b.resamples},
            {"seed", b.seed}}},
          {"calibration", calibration_.summary()},
          {"slices", slices},
          {"worst_slice", worst},
          {"slices_worse_than_mean", worse},
          {"per_sequence", {{"sequence", all_.sequences}, {"loss_sums", all_.loss_sums}, {"tokens", all_.tokens}}}};
}

}  // namespace shardtrain
