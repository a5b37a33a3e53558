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
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"
#include "shardtrain/decision/utility.hpp"

namespace shardtrain {

inline constexpr const char* kPolicyFormat = "shardtrain-release-policy";

struct RubricItem {
  std::string name;
  double weight = 1;
  bool required = false;
  bool operator==(const RubricItem&) const = default;
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
  // {"max_matured_loss_excess", "max_slice_regression", "max_drift_jsd", "fallback_baseline"
  //  (null when none; absent in policies and records before it: none)}
  nlohmann::json to_json() const;
  static RollbackRules from_json(const JsonFile& file, const std::string& at);
};

// Which decisions need a person, and the minutes each takes (the policy file's optional "review";
// absent: none does). A promotion or a rollback whose minutes are > 0 needs a review; the records
// say so, and it is pending until `release-gate review` signs it off (registry.hpp sign_off; the
// cost table adds the minutes and counts what is pending).
struct ReviewRules {
  double promote_minutes = 0, rollback_minutes = 0;
  bool operator==(const ReviewRules&) const = default;
  nlohmann::json to_json() const;  // {"promote_minutes", "rollback_minutes"}
  static ReviewRules from_json(const JsonFile& file, const std::string& at);
};

// A decision's review as its record keeps it: {"required", "minutes", "pending"}.
struct ReviewNeed {
  bool required = false;
  double minutes = 0;
  bool pending = false;  // as of the decision: = required (a later sign-off is in the registry's reviews/)
  bool operator==(const ReviewNeed&) const = default;
  nlohmann::json to_json() const;
  static ReviewNeed from_json(const JsonFile& file, const std::string& at);
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
  // The policy as a release record keeps it (not the policy file's layout: that one is read by
  // read_release_policy): {"path", "version", "sha256", "thresholds": {"max_loss_rise",
  // "max_slice_regression", "max_ece", "max_latency_ratio"}, "rubric": {"min_score", "items":
  // [{"name", "weight", "required"}]}, "utility", "rollback" (null when none), "review"}.
  nlohmann::json to_json() const;
  // The record's copy at JSON pointer `at`. "utility" may be absent (records of format_version 1,
  // before the utility): the default model then; "rollback" and "review" may be absent (records
  // before the monitor): none and no review.
  static ReleasePolicy from_json(const JsonFile& file, const std::string& at);
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
  nlohmann::json to_json() const;  // {"name", "passed", "applicable", "value", "limit", "reason"}
  static CheckResult from_json(const JsonFile& file, const std::string& at);
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
  nlohmann::json to_json() const;  // {"item", "path", "found", "passed", "detail"}
  static EvidenceResult from_json(const JsonFile& file, const std::string& at);
};

// One rubric item as scored: its evidence (an item without any: not found, path and detail "")
// and the policy's weight and requirement.
struct RubricItemScore {
  EvidenceResult evidence;
  double weight = 1;
  bool required = false;
  bool operator==(const RubricItemScore&) const = default;
  nlohmann::json to_json() const;  // EvidenceResult's fields and "weight", "required"
  static RubricItemScore from_json(const JsonFile& file, const std::string& at);
};

struct RubricScore {
  double score = 0, min_score = 0;
  std::vector<RubricItemScore> items;  // the policy's order
  bool operator==(const RubricScore&) const = default;
  nlohmann::json to_json() const;  // {"score", "min_score", "items"}
  static RubricScore from_json(const JsonFile& file, const std::string& at);
};

// The rubric: score = sum of the weights of passing items / sum of all weights. Returns the
// "rubric" check (failed when score < min_score) followed by one "evidence:<item>" check per
// required item that is missing or failing; fills `score` when given.
std::vector<CheckResult> score_rubric(const ReleasePolicy& policy, const std::vector<EvidenceResult>& evidence,
                                      RubricScore* score);

// The "utility" check (expected utility > 0) and the "regret" check (P(regret) < regret_bound).
std::vector<CheckResult> check_utility(const UtilityEstimate& utility);

}  // namespace shardtrain
