// The release policy (a versioned JSON file; its sha256 is the file's bytes) and the checks it
// makes of a candidate's evaluation against a baseline's (releaseeval/checkpoint_evaluation.hpp). The
// format, with every field, is in docs/FORMATS.md ("Release policy"); scripts/release-policy.json
// is the default policy.
//
// Checks (each one named in a reject's reasons):
//   trained_past_cutoff  the checkpoint's data cutoff is missing (trained on everything) or later
//                        than the evaluation's --cutoff: its training may have seen the hold-out.
//   holdout_mismatch     the two evaluations scored different hold-outs (the holdout identity differs
//                        in anything but the dataset's path):
//                        not a release decision; the caller treats it as unusable input.
//   loss_rise            candidate loss - baseline loss > thresholds.max_loss_rise (nats).
//   slice_regression     a slice (by key) whose candidate *lower* bound exceeds the baseline's loss
//                        for that slice by more than thresholds.max_slice_regression: it regressed
//                        by more than y beyond its own interval. Named as "slice_regression:<key>".
//   ece                  candidate ECE > thresholds.max_ece.
//   latency              candidate ms per sequence p50 > max_latency_ratio x the baseline's (p50:
//                        p99 of a few dozen forwards is one scheduling hiccup away); only
//                        against a checkpoint baseline (an n-gram has no comparable latency: the
//                        check is recorded as not applicable).
//   rubric               evidence score < rubric.min_score, or a required item missing or failing
//                        ("evidence:<item>").
//   utility              the expected utility of promoting against keeping the fallback is not > 0
//                        (decision/utility.hpp: the policy's utility model on the paired hold-out).
//   regret               the probability of regret (the candidate worse than the fallback) is not
//                        below utility.regret_bound.
#pragma once
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"
#include "shardtrain/decision/utility.hpp"

namespace shardtrain {

inline constexpr const char* kPolicyFormat = "shardtrain-release-policy";

struct RubricItem {
  std::string name;
  double weight = 1;
  bool required = false;
  bool operator==(const RubricItem&) const = default;
  // {"name", "weight" (>= 0), "required" (absent: false)}
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("name", &RubricItem::name), key("weight", &RubricItem::weight, in(NumberRange::at_least(0))),
                      key("required", &RubricItem::required, kMayBeAbsent)};
  }
};

// When a release in service must go (monitor/monitor.hpp applies them to the matured data, through rollback_rules.hpp): the
// policy file's optional "rollback" object. A monitor refuses a policy without one (it cannot say
// when to roll back, so it will not pretend to keep watch).
//   matured_loss            the matured loss's lower bound > the release-time upper bound +
//                           max_matured_loss_excess (nats): worse beyond both intervals.
//   slice_regression:<key>  the same for one slice (owner or version) present at both times, with
//                           max_slice_regression (nats).
//   drift                   the Jensen-Shannon divergence (bits, in [0, 1]) of the matured data's
//                           token distribution from the training selection's > max_drift_jsd.
// fallback_baseline (optional): a registered baseline's name, put in service when a release must go
// and there is no previous known-good to put back (the first release); absent: such a rollback is
// blocked unless `monitor --rollback-to baseline:NAME` names one.
struct RollbackRules {
  double max_matured_loss_excess = 0, max_slice_regression = 0.05, max_drift_jsd = 0.1;
  std::optional<std::string> fallback_baseline;
  bool operator==(const RollbackRules&) const = default;
  // Every bound >= 0; fallback_baseline null when none (absent in policies and records before it:
  // none), never "".
  static auto fields() {
    using namespace json_fields;
    using R = RollbackRules;
    const In bound = in(NumberRange::at_least(0));
    return std::tuple{key("max_matured_loss_excess", &R::max_matured_loss_excess, bound),
                      key("max_slice_regression", &R::max_slice_regression, bound),
                      key("max_drift_jsd", &R::max_drift_jsd, bound),
                      key("fallback_baseline", &R::fallback_baseline, non_empty<>, kMayBeAbsent)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static RollbackRules from_json(const JsonFile& f, const std::string& at) { return json_fields::read<RollbackRules>(f, at); }
};

// Which decisions need a person, and the minutes each takes (the policy file's optional "review";
// absent: none does). A promotion or a rollback whose minutes are > 0 needs a review; the records
// say so, and it is pending until `release-gate review` signs it off (registry.hpp sign_off; the
// cost table adds the minutes and counts what is pending).
struct ReviewRules {
  double promote_minutes = 0, rollback_minutes = 0;
  bool operator==(const ReviewRules&) const = default;
  static auto fields() {  // minutes >= 0
    using namespace json_fields;
    const In minutes = in(NumberRange::at_least(0));
    return std::tuple{key("promote_minutes", &ReviewRules::promote_minutes, minutes),
                      key("rollback_minutes", &ReviewRules::rollback_minutes, minutes)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static ReviewRules from_json(const JsonFile& f, const std::string& at) { return json_fields::read<ReviewRules>(f, at); }
};

// A decision's review as its record keeps it.
struct ReviewNeed {
  bool required = false;
  double minutes = 0;
  bool pending = false;  // as of the decision: = required (a later sign-off is in the registry's reviews/)
  bool operator==(const ReviewNeed&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("required", &ReviewNeed::required), key("minutes", &ReviewNeed::minutes),
                      key("pending", &ReviewNeed::pending)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static ReviewNeed from_json(const JsonFile& f, const std::string& at) { return json_fields::read<ReviewNeed>(f, at); }
  static ReviewNeed of(double minutes) { return {minutes > 0, minutes, minutes > 0}; }
};

struct ReleasePolicy {
  std::string path, version, sha256;
  double max_loss_rise = 0, max_slice_regression = 0, max_ece = 0, max_latency_ratio = 0;
  double min_score = 0.8;
  std::vector<RubricItem> rubric;
  UtilityModel utility;
  std::optional<RollbackRules> rollback;  // absent: a monitor refuses the policy
  ReviewRules review;
  bool operator==(const ReleasePolicy&) const = default;
  // What the policy file and a release record's copy of it share: "version", "thresholds" (each
  // >= 0), "rubric" (min_score in [0, 1], its items), "utility" (its presence the caller's),
  // "rollback" (absent or null: none) and "review" (absent: none). The file's version and items
  // must not be empty (`version`, `items`: json_fields::non_empty; a record's copy: ByType).
  static auto rule_fields(json_fields::Presence utility, auto version, auto items) {
    using namespace json_fields;
    using P = ReleasePolicy;
    const In at_least_0 = in(NumberRange::at_least(0));
    return std::tuple{key("version", &P::version, version),
                      group("thresholds", key("max_loss_rise", &P::max_loss_rise, at_least_0),
                            key("max_slice_regression", &P::max_slice_regression, at_least_0),
                            key("max_ece", &P::max_ece, at_least_0), key("max_latency_ratio", &P::max_latency_ratio, at_least_0)),
                      group("rubric", key("min_score", &P::min_score, in({0, 1})),
                            key("items", &P::rubric, items)),
                      key("utility", &P::utility, utility), key("rollback", &P::rollback, kMayBeAbsent),
                      key("review", &P::review, kMayBeAbsent)};
  }
  // The policy as a release record keeps it: the file's rules with its "path" and "sha256" (no
  // "format"). "utility" may be absent (records of format_version 1, before the utility): the
  // default model then.
  static auto fields() {
    using namespace json_fields;
    return std::tuple_cat(std::tuple{key("path", &ReleasePolicy::path), key("sha256", &ReleasePolicy::sha256)},
                          rule_fields(kMayBeAbsent, ByType{}, ByType{}));
  }
  // The policy file: "format": kPolicyFormat and the rules, "utility" required (read_release_policy).
  static auto file_fields() {
    using namespace json_fields;
    return std::tuple_cat(std::tuple{format_tag("format", kPolicyFormat, "release policy")},
                          rule_fields(kRequired, non_empty<>, non_empty<std::vector<RubricItem>>));
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static ReleasePolicy from_json(const JsonFile& f, const std::string& at) { return json_fields::read<ReleasePolicy>(f, at); }
};

// Reads and validates a policy file. Throws IoError (unreadable) or UsageError naming the field.
ReleasePolicy read_release_policy(const std::string& path);

// What a check measured and its limit: nothing (null in JSON), a number (nats, a ratio, a score)
// or a string (the cutoffs of trained_past_cutoff).
using CheckValue = std::variant<std::monostate, double, std::string>;

// One check's outcome.
struct CheckResult {
  std::string name;       // e.g. "loss_rise", "slice_regression:owner=alice", "evidence:kill_resume"
  bool passed = true;
  bool applicable = true;
  CheckValue value, limit;
  std::string reason;     // a sentence; set for failures and not-applicable checks
  bool operator==(const CheckResult&) const = default;
  // A CheckValue in JSON: null, a number or a string.
  struct ValueCodec {
    CheckValue read(const JsonFile& f, const std::string& pointer) const;
    nlohmann::json write(const CheckValue& v) const;
  };
  static auto fields() {
    using namespace json_fields;
    using C = CheckResult;
    return std::tuple{key("name", &C::name),           key("passed", &C::passed),
                      key("applicable", &C::applicable), key("value", &C::value, ValueCodec{}),
                      key("limit", &C::limit, ValueCodec{}), key("reason", &C::reason)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static CheckResult from_json(const JsonFile& f, const std::string& at) { return json_fields::read<CheckResult>(f, at); }
};

// The evaluation checks (trained_past_cutoff, loss_rise, slice_regression, ece, latency) of a
// candidate against a baseline. Throws UsageError "holdout_mismatch: ..." when they are not
// comparable.
std::vector<CheckResult> compare_with_baseline(const ReleasePolicy& policy, const CheckpointEvaluation& candidate,
                                               const CheckpointEvaluation& baseline);

// One evidence item's outcome (release_evidence.hpp finds and reads it).
struct EvidenceResult {
  std::string item, path;
  bool found = false, passed = false;
  std::string detail;
  bool operator==(const EvidenceResult&) const = default;
  static auto fields() {
    using namespace json_fields;
    using E = EvidenceResult;
    return std::tuple{key("item", &E::item), key("path", &E::path), key("found", &E::found), key("passed", &E::passed),
                      key("detail", &E::detail)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static EvidenceResult from_json(const JsonFile& f, const std::string& at) { return json_fields::read<EvidenceResult>(f, at); }
};

// One rubric item as scored: its evidence (an item without any: not found, path and detail "")
// and the policy's weight and requirement.
struct RubricItemScore {
  EvidenceResult evidence;
  double weight = 1;
  bool required = false;
  bool operator==(const RubricItemScore&) const = default;
  static auto fields() {  // EvidenceResult's fields and "weight", "required"
    using namespace json_fields;
    using R = RubricItemScore;
    return std::tuple{inlined(&R::evidence), key("weight", &R::weight), key("required", &R::required)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static RubricItemScore from_json(const JsonFile& f, const std::string& at) { return json_fields::read<RubricItemScore>(f, at); }
};

struct RubricScore {
  double score = 0, min_score = 0;
  std::vector<RubricItemScore> items;  // the policy's order
  bool operator==(const RubricScore&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("score", &RubricScore::score), key("min_score", &RubricScore::min_score),
                      key("items", &RubricScore::items)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static RubricScore from_json(const JsonFile& f, const std::string& at) { return json_fields::read<RubricScore>(f, at); }
};

// The rubric: score = sum of the weights of passing items / sum of all weights. Returns the
// "rubric" check (failed when score < min_score) followed by one "evidence:<item>" check per
// required item that is missing or failing; fills `score` when given.
std::vector<CheckResult> score_rubric(const ReleasePolicy& policy, const std::vector<EvidenceResult>& evidence,
                                      RubricScore* score);

// The "utility" check (expected utility > 0) and the "regret" check (P(regret) < regret_bound).
std::vector<CheckResult> check_utility(const UtilityEstimate& utility);

}  // namespace shardtrain
