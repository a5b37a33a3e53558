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
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_number.hpp"

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

nlohmann::json value_json(const CheckValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* t = std::get_if<std::string>(&v)) return *t;
  return nullptr;
}

CheckValue value_from(const JsonFile& f, const std::string& pointer) {
  const nlohmann::json& v = f.at(pointer);
  if (v.is_null()) return std::monostate{};
  if (v.is_string()) return v.get<std::string>();
  return f.number(pointer);  // names the field when it is neither
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
          {"utility", utility.to_json()},
          {"rollback", rollback ? rollback->to_json() : nlohmann::json(nullptr)},
          {"review", review.to_json()}};
}

nlohmann::json RollbackRules::to_json() const {
  return {{"max_matured_loss_excess", max_matured_loss_excess},
          {"max_slice_regression", max_slice_regression},
          {"max_drift_jsd", max_drift_jsd},
          {"fallback_baseline", json_fields::or_null(fallback_baseline)}};
}

RollbackRules RollbackRules::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  RollbackRules r;
  r.max_matured_loss_excess = f.number(field(at, "max_matured_loss_excess"));
  r.max_slice_regression = f.number(field(at, "max_slice_regression"));
  r.max_drift_jsd = f.number(field(at, "max_drift_jsd"));
  for (const double v : {r.max_matured_loss_excess, r.max_slice_regression, r.max_drift_jsd})
    if (!(v >= 0)) f.fail(at + ": every rollback bound must be >= 0");
  r.fallback_baseline = json_fields::nullable_string(f, field(at, "fallback_baseline"));
  if (r.fallback_baseline && r.fallback_baseline->empty())
    f.fail("field " + field(at, "fallback_baseline") + " is empty: name a registered baseline, or leave it out");
  return r;
}

nlohmann::json ReviewRules::to_json() const {
  return {{"promote_minutes", promote_minutes}, {"rollback_minutes", rollback_minutes}};
}

ReviewRules ReviewRules::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  ReviewRules r{f.number(field(at, "promote_minutes")), f.number(field(at, "rollback_minutes"))};
  if (!(r.promote_minutes >= 0) || !(r.rollback_minutes >= 0)) f.fail(at + ": review minutes must be >= 0");
  return r;
}

nlohmann::json ReviewNeed::to_json() const { return {{"required", required}, {"minutes", minutes}, {"pending", pending}}; }

ReviewNeed ReviewNeed::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  return {json_fields::boolean(f, field(at, "required")), f.number(field(at, "minutes")),
          json_fields::boolean(f, field(at, "pending"))};
}

ReleasePolicy ReleasePolicy::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  ReleasePolicy p;
  p.path = f.string(field(at, "path"));
  p.version = f.string(field(at, "version"));
  p.sha256 = f.string(field(at, "sha256"));
  const std::string t = field(at, "thresholds");
  p.max_loss_rise = f.number(field(t, "max_loss_rise"));
  p.max_slice_regression = f.number(field(t, "max_slice_regression"));
  p.max_ece = f.number(field(t, "max_ece"));
  p.max_latency_ratio = f.number(field(t, "max_latency_ratio"));
  const std::string r = field(at, "rubric");
  p.min_score = f.number(field(r, "min_score"));
  const std::string items = field(r, "items");
  for (std::size_t i = 0, n = json_fields::array_size(f, items); i < n; ++i) {
    const std::string item = field(items, std::to_string(i));
    p.rubric.push_back({f.string(field(item, "name")), f.number(field(item, "weight")),
                        json_fields::boolean(f, field(item, "required"))});
  }
  if (f.has(field(at, "utility")))
    p.utility = UtilityModel::from_json(f.at(field(at, "utility")), f.path() + ": " + f.what() + " " + field(at, "utility"));
  if (f.has(field(at, "rollback")) && !f.at(field(at, "rollback")).is_null())
    p.rollback = RollbackRules::from_json(f, field(at, "rollback"));
  if (f.has(field(at, "review"))) p.review = ReviewRules::from_json(f, field(at, "review"));
  return p;
}

ReleasePolicy read_release_policy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot read the release policy (--policy)");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const JsonFile whole = JsonFile::parse(bytes, path, "the release policy (--policy)");
  const nlohmann::json& j = whole.json();
  if (!j.is_object() || j.find("format") == j.end() || *j.find("format") != kPolicyFormat)
    throw UsageError(path + ": not a release policy (\"format\" must be \"" + kPolicyFormat + "\")");
  if (!j.contains("version") || !j["version"].is_string() || j["version"].get<std::string>().empty())
    throw UsageError(path + ": needs a non-empty string 'version'");
  ReleasePolicy p;
  p.path = path;
  p.version = j["version"];
  p.sha256 = to_hex(sha256(bytes.data(), bytes.size()));
  const std::string t = path + ": thresholds";
  if (!j.contains("thresholds") || !j["thresholds"].is_object()) throw UsageError(t + " missing (an object)");
  p.max_loss_rise = json_number(j["thresholds"], "max_loss_rise", t, NumberRange::at_least(0));
  p.max_slice_regression = json_number(j["thresholds"], "max_slice_regression", t, NumberRange::at_least(0));
  p.max_ece = json_number(j["thresholds"], "max_ece", t, NumberRange::at_least(0));
  p.max_latency_ratio = json_number(j["thresholds"], "max_latency_ratio", t, NumberRange::at_least(0));
  const std::string r = path + ": rubric";
  if (!j.contains("rubric") || !j["rubric"].is_object()) throw UsageError(r + " missing (an object)");
  p.min_score = json_number(j["rubric"], "min_score", r, NumberRange::at_least(0));
  if (p.min_score > 1) throw UsageError(r + ": min_score is a fraction in [0, 1]");
  if (!j["rubric"].contains("items") || !j["rubric"]["items"].is_array() || j["rubric"]["items"].empty())
    throw UsageError(r + ": needs a non-empty array 'items'");
  for (const auto& item : j["rubric"]["items"]) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string())
      throw UsageError(r + ": every item needs a string 'name'");
    if (item.contains("required") && !item["required"].is_boolean())
      throw UsageError(r + " item " + item["name"].get<std::string>() + ": 'required' is not true or false");
    const std::string name = item["name"].get<std::string>();
    RubricItem ri{name, json_number(item, "weight", r + " item " + name, NumberRange::at_least(0)),
                  item.value("required", false)};
    p.rubric.push_back(ri);
  }
  p.utility = UtilityModel::from_json(j.contains("utility") ? j["utility"] : nlohmann::json(nullptr), path);
  // The optional parts, read through JsonFile (its errors name the file and the field).
  if (whole.has("/rollback")) p.rollback = RollbackRules::from_json(whole, "/rollback");
  if (whole.has("/review")) p.review = ReviewRules::from_json(whole, "/review");
  return p;
}

nlohmann::json CheckResult::to_json() const {
  return {{"name", name},           {"passed", passed},         {"applicable", applicable},
          {"value", value_json(value)}, {"limit", value_json(limit)}, {"reason", reason}};
}

CheckResult CheckResult::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  return {f.string(field(at, "name")),        json_fields::boolean(f, field(at, "passed")),
          json_fields::boolean(f, field(at, "applicable")), value_from(f, field(at, "value")),
          value_from(f, field(at, "limit")),   f.string(field(at, "reason"))};
}

nlohmann::json EvidenceResult::to_json() const {
  return {{"item", item}, {"path", path}, {"found", found}, {"passed", passed}, {"detail", detail}};
}

EvidenceResult EvidenceResult::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  return {f.string(field(at, "item")), f.string(field(at, "path")), json_fields::boolean(f, field(at, "found")),
          json_fields::boolean(f, field(at, "passed")), f.string(field(at, "detail"))};
}

nlohmann::json RubricItemScore::to_json() const {
  nlohmann::json j = evidence.to_json();
  j["weight"] = weight;
  j["required"] = required;
  return j;
}

RubricItemScore RubricItemScore::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  return {EvidenceResult::from_json(f, at), f.number(field(at, "weight")), json_fields::boolean(f, field(at, "required"))};
}

nlohmann::json RubricScore::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& i : items) list.push_back(i.to_json());
  return {{"score", score}, {"min_score", min_score}, {"items", list}};
}

RubricScore RubricScore::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  RubricScore r;
  r.score = f.number(field(at, "score"));
  r.min_score = f.number(field(at, "min_score"));
  const std::string items = field(at, "items");
  for (std::size_t i = 0, n = json_fields::array_size(f, items); i < n; ++i)
    r.items.push_back(RubricItemScore::from_json(f, field(items, std::to_string(i))));
  return r;
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
