#include "shardtrain/decision/policy.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/base/json_record.hpp"

namespace shardtrain {
namespace {

std::string fixed(double v) {
  std::ostringstream s;
  s.precision(4);
  s << std::fixed << v;
  return s.str();
}

CheckResult check(const std::string& name, bool passed, double value, double limit, const std::string& failure) {
  CheckResult c{name, passed, true, value, limit, passed ? "" : failure};
  return c;
}

}  // namespace

ReleasePolicy read_release_policy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot read the release policy (--policy)");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const JsonFile file = JsonFile::parse(bytes, path, "the release policy (--policy)");
  ReleasePolicy p;
  json_fields::read_fields(file, "", p, ReleasePolicy::file_fields());
  p.path = path;
  p.sha256 = to_hex(sha256(bytes.data(), bytes.size()));
  return p;
}

CheckValue CheckResult::ValueCodec::read(const JsonFile& f, const std::string& pointer) const {
  const nlohmann::json& v = f.at(pointer);
  if (v.is_null()) return std::monostate{};
  if (v.is_string()) return v.get<std::string>();
  return f.number(pointer);  // names the field when it is neither
}

nlohmann::json CheckResult::ValueCodec::write(const CheckValue& v) const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* t = std::get_if<std::string>(&v)) return *t;
  return nullptr;
}

std::vector<CheckResult> compare_with_baseline(const ReleasePolicy& policy, const CheckpointEvaluation& cand,
                                               const CheckpointEvaluation& base) {
  // The same positions: every field of the hold-out identity but the path the dataset was named by.
  if (!cand.holdout.same_positions(base.holdout))
    throw UsageError("holdout_mismatch: the candidate and the baseline were evaluated on different hold-outs "
                     "(candidate " + cand.holdout.to_json().dump() + ", baseline " + base.holdout.to_json().dump() +
                     "); register the baseline again with the same --data, --cutoff, --seq-len and --max-samples");
  std::vector<CheckResult> checks;
  // Data leak: the checkpoint's cutoff against the evaluation's.
  const std::string& eval_cutoff = cand.holdout.cutoff;
  const std::string& trained_cutoff = cand.checkpoint.data_cutoff;
  const auto trained_at = try_parse_rfc3339(trained_cutoff);
  const bool leak = !trained_at || *trained_at > parse_rfc3339(eval_cutoff, "evaluation cutoff");
  checks.push_back({"trained_past_cutoff", !leak, true, trained_cutoff, eval_cutoff,
                    leak ? "the checkpoint was trained with data cutoff '" + trained_cutoff +
                               "' (empty: none), later than the evaluation cutoff " + eval_cutoff +
                               ": its training data may include the hold-out"
                         : ""});
  const HoldoutSummary& cs = cand.scores;
  const HoldoutSummary& bs = base.scores;
  const double rise = cs.loss - bs.loss;
  checks.push_back(check("loss_rise", rise <= policy.max_loss_rise, rise, policy.max_loss_rise,
                         "hold-out loss " + fixed(cs.loss) + " vs the baseline's " + fixed(bs.loss) + ": a rise of " +
                             fixed(rise) + " nats > " + fixed(policy.max_loss_rise)));
  std::map<std::string, double> base_slices;
  for (const auto& s : bs.slices) base_slices[s.key] = s.loss;
  for (const auto& s : cs.slices) {
    const auto it = base_slices.find(s.key);
    if (it == base_slices.end()) continue;  // identical hold-outs have identical slices
    const double beyond = s.lower - it->second;
    if (beyond > policy.max_slice_regression)
      checks.push_back(check("slice_regression:" + s.key, false, beyond, policy.max_slice_regression,
                             "slice " + s.key + ": loss " + fixed(s.loss) + " (95% interval from " + fixed(s.lower) +
                                 ") vs the baseline's " + fixed(it->second) + ": " + fixed(beyond) +
                                 " nats worse beyond its interval > " + fixed(policy.max_slice_regression)));
  }
  if (std::none_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.name.rfind("slice_regression", 0) == 0; }))
    checks.push_back({"slice_regression", true, true, std::monostate{}, policy.max_slice_regression, ""});
  const double ece = cs.calibration.ece;
  checks.push_back(check("ece", ece <= policy.max_ece, ece, policy.max_ece,
                         "expected calibration error " + fixed(ece) + " > " + fixed(policy.max_ece)));
  if (base.is_checkpoint()) {
    // The median, not p99: p99 of a few dozen forwards is their maximum, one scheduling hiccup on a
    // shared machine (measured: 0.17 -> 4.7 ms between two runs of one model), not the model's cost.
    const double c50 = cand.latency.ms_per_sequence_p50, b50 = base.latency.ms_per_sequence_p50;
    const double ratio = c50 / b50;
    checks.push_back(check("latency", ratio <= policy.max_latency_ratio, ratio, policy.max_latency_ratio,
                           "p50 " + fixed(c50) + " ms per sequence = " + fixed(ratio) + " x the baseline's " + fixed(b50) +
                               " > " + fixed(policy.max_latency_ratio) + " x"));
  } else {
    checks.push_back({"latency", true, false, std::monostate{}, policy.max_latency_ratio,
                      "not applicable: the baseline is an n-gram model, without a comparable latency"});
  }
  return checks;
}

std::vector<CheckResult> score_rubric(const ReleasePolicy& policy, const std::vector<EvidenceResult>& evidence,
                                      RubricScore* score_out) {
  double total = 0, earned = 0;
  std::vector<CheckResult> missing;
  RubricScore rubric;
  for (const auto& item : policy.rubric) {
    const auto it = std::find_if(evidence.begin(), evidence.end(), [&](const EvidenceResult& e) { return e.item == item.name; });
    const bool passed = it != evidence.end() && it->passed;
    total += item.weight;
    earned += passed ? item.weight : 0;
    RubricItemScore scored{it != evidence.end() ? *it : EvidenceResult{item.name, "", false, false, ""}, item.weight,
                           item.required};
    rubric.items.push_back(scored);
    if (item.required && !passed)
      missing.push_back({"evidence:" + item.name, false, true, std::monostate{}, std::monostate{},
                         "required evidence '" + item.name + "' " +
                             (it == evidence.end() || !it->found ? "is missing" : "fails") +
                             (it != evidence.end() ? " (" + it->path + (it->detail.empty() ? "" : ": " + it->detail) + ")" : "")});
  }
  const double score = total > 0 ? earned / total : 0;
  rubric.score = score;
  rubric.min_score = policy.min_score;
  if (score_out) *score_out = rubric;
  std::vector<CheckResult> checks{check("rubric", score >= policy.min_score, score, policy.min_score,
                                        "rubric score " + fixed(score) + " < " + fixed(policy.min_score))};
  checks.insert(checks.end(), missing.begin(), missing.end());
  return checks;
}

std::vector<CheckResult> check_utility(const UtilityEstimate& u) {
  const std::string interval = " (" + std::to_string(std::lround(u.level * 100)) + "% interval " + fixed(u.lower) + " to " +
                               fixed(u.upper) + ")";
  return {check("utility", u.positive(), u.expected_utility, 0.0,
                "expected utility of promoting over keeping " + u.fallback + " is " + fixed(u.expected_utility) +
                    interval + ", not > 0: " + fixed(u.loss_saved) + " nats/token saved is worth " +
                    fixed(u.value_over_horizon) + ", latency costs " + fixed(u.latency_cost_over_horizon) +
                    ", regret risk " + fixed(u.model.bad_release_cost * u.regret_probability)),
          check("regret", u.regret_within_bound(), u.regret_probability, u.model.regret_bound,
                "probability of regret (the candidate worse than " + u.fallback + ") " + fixed(u.regret_probability) +
                    " = " + std::to_string(u.regret_resamples) + " of " + std::to_string(u.resamples) +
                    " resamples, not below " + fixed(u.model.regret_bound))};
}

}  // namespace shardtrain
