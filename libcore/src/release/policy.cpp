#include "shardtrain/release/policy.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/base/time.hpp"

namespace shardtrain {
namespace {

double number_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number()) throw UsageError(where + ": needs a number '" + key + "'");
  const double v = j[key].get<double>();
  if (!(v >= 0)) throw UsageError(where + ": '" + key + "' must be >= 0");
  return v;
}

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

nlohmann::json ReleasePolicy::to_json() const {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& i : rubric) items.push_back({{"name", i.name}, {"weight", i.weight}, {"required", i.required}});
  return {{"path", path},
          {"version", version},
          {"sha256", sha256},
          {"thresholds",
           {{"max_loss_rise", max_loss_rise},
            {"max_slice_regression", max_slice_regression},
            {"max_ece", max_ece},
            {"max_latency_ratio", max_latency_ratio}}},
          {"rubric", {{"min_score", min_score}, {"items", items}}},
          {"utility", utility.to_json()}};
}

ReleasePolicy read_release_policy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot read the release policy (--policy)");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json j = JsonFile::parse(bytes, path, "the release policy (--policy)").json();
  if (!j.is_object() || j.value("format", "") != kPolicyFormat)
    throw UsageError(path + ": not a release policy (\"format\" must be \"" + kPolicyFormat + "\")");
  if (!j.contains("version") || !j["version"].is_string() || j["version"].get<std::string>().empty())
    throw UsageError(path + ": needs a non-empty string 'version'");
  ReleasePolicy p;
  p.path = path;
  p.version = j["version"];
  p.sha256 = to_hex(sha256(bytes.data(), bytes.size()));
  const std::string t = path + ": thresholds";
  if (!j.contains("thresholds") || !j["thresholds"].is_object()) throw UsageError(t + " missing (an object)");
  p.max_loss_rise = number_field(j["thresholds"], "max_loss_rise", t);
  p.max_slice_regression = number_field(j["thresholds"], "max_slice_regression", t);
  p.max_ece = number_field(j["thresholds"], "max_ece", t);
  p.max_latency_ratio = number_field(j["thresholds"], "max_latency_ratio", t);
  const std::string r = path + ": rubric";
  if (!j.contains("rubric") || !j["rubric"].is_object()) throw UsageError(r + " missing (an object)");
  p.min_score = number_field(j["rubric"], "min_score", r);
  if (p.min_score > 1) throw UsageError(r + ": min_score is a fraction in [0, 1]");
  if (!j["rubric"].contains("items") || !j["rubric"]["items"].is_array() || j["rubric"]["items"].empty())
    throw UsageError(r + ": needs a non-empty array 'items'");
  for (const auto& item : j["rubric"]["items"]) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string())
      throw UsageError(r + ": every item needs a string 'name'");
    RubricItem ri{item["name"], number_field(item, "weight", r + " item " + item["name"].get<std::string>()),
                  item.value("required", false)};
    p.rubric.push_back(ri);
  }
  p.utility = UtilityModel::from_json(j.contains("utility") ? j["utility"] : nlohmann::json(nullptr), path);
  return p;
}

nlohmann::json CheckResult::to_json() const {
  return {{"name", name}, {"passed", passed}, {"applicable", applicable}, {"value", value}, {"limit", limit},
          {"reason", reason}};
}

nlohmann::json EvidenceResult::to_json() const {
  return {{"item", item}, {"path", path}, {"found", found}, {"passed", passed}, {"detail", detail}};
}

std::vector<CheckResult> compare_with_baseline(const ReleasePolicy& policy, const nlohmann::json& cand,
                                               const nlohmann::json& base) {
  // The same positions: every field of the hold-out identity but the path the dataset was named by.
  nlohmann::json ch = cand.at("holdout"), bh = base.at("holdout");
  ch.erase("data");
  bh.erase("data");
  if (ch != bh)
    throw UsageError("holdout_mismatch: the candidate and the baseline were evaluated on different hold-outs "
                     "(candidate " + cand["holdout"].dump() + ", baseline " + base["holdout"].dump() +
                     "); register the baseline again with the same --data, --cutoff, --seq-len and --max-samples");
  std::vector<CheckResult> checks;
  // Data leak: the checkpoint's cutoff against the evaluation's.
  const std::string eval_cutoff = cand["holdout"]["cutoff"];
  const std::string trained_cutoff = cand["checkpoint"]["data_cutoff"];
  const auto trained_at = try_parse_rfc3339(trained_cutoff);
  const bool leak = !trained_at || *trained_at > parse_rfc3339(eval_cutoff, "evaluation cutoff");
  checks.push_back({"trained_past_cutoff", !leak, true, trained_cutoff, eval_cutoff,
                    leak ? "the checkpoint was trained with data cutoff '" + trained_cutoff +
                               "' (empty: none), later than the evaluation cutoff " + eval_cutoff +
                               ": its training data may include the hold-out"
                         : ""});
  const auto& cs = cand["scores"];
  const auto& bs = base["scores"];
  const double rise = cs["loss"].get<double>() - bs["loss"].get<double>();
  checks.push_back(check("loss_rise", rise <= policy.max_loss_rise, rise, policy.max_loss_rise,
                         "hold-out loss " + fixed(cs["loss"]) + " vs the baseline's " + fixed(bs["loss"]) + ": a rise of " +
                             fixed(rise) + " nats > " + fixed(policy.max_loss_rise)));
  std::map<std::string, double> base_slices;
  for (const auto& s : bs["slices"]) base_slices[s["key"]] = s["loss"];
  for (const auto& s : cs["slices"]) {
    const auto it = base_slices.find(s["key"]);
    if (it == base_slices.end()) continue;  // identical hold-outs have identical slices
    const double beyond = s["lower"].get<double>() - it->second;
    if (beyond > policy.max_slice_regression)
      checks.push_back(check("slice_regression:" + s["key"].get<std::string>(), false, beyond, policy.max_slice_regression,
                             "slice " + s["key"].get<std::string>() + ": loss " + fixed(s["loss"]) + " (95% interval from " +
                                 fixed(s["lower"]) + ") vs the baseline's " + fixed(it->second) + ": " + fixed(beyond) +
                                 " nats worse beyond its interval > " + fixed(policy.max_slice_regression)));
  }
  if (std::none_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.name.rfind("slice_regression", 0) == 0; }))
    checks.push_back({"slice_regression", true, true, nullptr, policy.max_slice_regression, ""});
  const double ece = cs["calibration"]["ece"];
  checks.push_back(check("ece", ece <= policy.max_ece, ece, policy.max_ece,
                         "expected calibration error " + fixed(ece) + " > " + fixed(policy.max_ece)));
  if (base.value("kind", "") == "checkpoint") {
    // The median, not p99: p99 of a few dozen forwards is their maximum, one scheduling hiccup on a
    // shared machine (measured: 0.17 -> 4.7 ms between two runs of one model), not the model's cost.
    const double c50 = cand["latency"]["ms_per_sequence_p50"], b50 = base["latency"]["ms_per_sequence_p50"];
    const double ratio = c50 / b50;
    checks.push_back(check("latency", ratio <= policy.max_latency_ratio, ratio, policy.max_latency_ratio,
                           "p50 " + fixed(c50) + " ms per sequence = " + fixed(ratio) + " x the baseline's " + fixed(b50) +
                               " > " + fixed(policy.max_latency_ratio) + " x"));
  } else {
    checks.push_back({"latency", true, false, nullptr, policy.max_latency_ratio,
                      "not applicable: the baseline is an n-gram model, without a comparable latency"});
  }
  return checks;
}

std::vector<CheckResult> score_rubric(const ReleasePolicy& policy, const std::vector<EvidenceResult>& evidence,
                                      nlohmann::json* score_json) {
  double total = 0, earned = 0;
  std::vector<CheckResult> missing;
  nlohmann::json items = nlohmann::json::array();
  for (const auto& item : policy.rubric) {
    const auto it = std::find_if(evidence.begin(), evidence.end(), [&](const EvidenceResult& e) { return e.item == item.name; });
    const bool passed = it != evidence.end() && it->passed;
    total += item.weight;
    earned += passed ? item.weight : 0;
    nlohmann::json j = it != evidence.end() ? it->to_json() : nlohmann::json{{"item", item.name}, {"found", false}, {"passed", false}};
    j["weight"] = item.weight;
    j["required"] = item.required;
    items.push_back(j);
    if (item.required && !passed)
      missing.push_back({"evidence:" + item.name, false, true, nullptr, nullptr,
                         "required evidence '" + item.name + "' " +
                             (it == evidence.end() || !it->found ? "is missing" : "fails") +
                             (it != evidence.end() ? " (" + it->path + (it->detail.empty() ? "" : ": " + it->detail) + ")" : "")});
  }
  const double score = total > 0 ? earned / total : 0;
  if (score_json) *score_json = {{"score", score}, {"min_score", policy.min_score}, {"items", items}};
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
