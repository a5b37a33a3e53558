// The rollback rules applied (rollback_rules.hpp).
#include "shardtrain/decision/rollback_rules.hpp"

#include <algorithm>

#include "decision/score_text.hpp"

namespace shardtrain {
namespace {

using score_text::find_slice;
using score_text::interval_text;
using score_text::num;

constexpr const char* kSlicePrefix = "slice_regression:";
constexpr const char* kRolledBackPrefix = "rolled_back_slice:";

}  // namespace

std::vector<CheckResult> rollback_checks(const RollbackRules& rules, const HoldoutSummary& release_time,
                                         const HoldoutSummary& matured, double drift_jsd_bits) {
  std::vector<CheckResult> checks;
  {
    const double limit = release_time.interval.upper + rules.max_matured_loss_excess;
    const bool passed = !(matured.interval.lower > limit);
    checks.push_back({"matured_loss", passed, true, matured.interval.lower, limit,
                      passed ? ""
                             : "the matured loss " + interval_text(matured.loss, matured.interval.lower, matured.interval.upper) +
                                   " is worse than the release-time interval " +
                                   interval_text(release_time.loss, release_time.interval.lower, release_time.interval.upper) +
                                   " by more than " + num(rules.max_matured_loss_excess) + " nats beyond both"});
  }
  for (const auto& m : matured.slices) {
    const SliceScore* r = find_slice(release_time, m.key);
    if (!r) {
      checks.push_back({kSlicePrefix + m.key, true, false, m.lower, std::monostate{},
                        "no release-time estimate of this slice (it has matured documents only now)"});
      continue;
    }
    const double limit = r->upper + rules.max_slice_regression;
    const bool passed = !(m.lower > limit);
    checks.push_back({kSlicePrefix + m.key, passed, true, m.lower, limit,
                      passed ? ""
                             : m.key + " matured at " + interval_text(m.loss, m.lower, m.upper) + " against " +
                                   interval_text(r->loss, r->lower, r->upper) + " at release: worse by more than " +
                                   num(rules.max_slice_regression) + " nats beyond both intervals"});
  }
  const bool passed = !(drift_jsd_bits > rules.max_drift_jsd);
  checks.push_back({"drift", passed, true, drift_jsd_bits, rules.max_drift_jsd,
                    passed ? ""
                           : "the matured tokens diverge from the training selection's by " + num(drift_jsd_bits) +
                                 " bits (Jensen-Shannon), above " + num(rules.max_drift_jsd)});
  return checks;
}

bool must_roll_back(const std::vector<CheckResult>& checks) {
  return std::any_of(checks.begin(), checks.end(), [](const CheckResult& c) { return !c.passed; });
}

std::vector<std::string> regressed_slices(const std::vector<CheckResult>& checks) {
  std::vector<std::string> keys;
  const std::string prefix = kSlicePrefix;
  for (const auto& c : checks)
    if (!c.passed && c.name.rfind(prefix, 0) == 0) keys.push_back(c.name.substr(prefix.size()));
  return keys;
}

std::vector<CheckResult> rolled_back_slice_checks(const RollbackRecord& standing, const HoldoutSummary& candidate,
                                                  const HoldoutSummary& in_service_release_time,
                                                  double max_slice_regression, const std::string& reference) {
  std::vector<CheckResult> checks;
  for (const auto& key : standing.slices) {
    const SliceScore* c = find_slice(candidate, key);
    const SliceScore* r = find_slice(in_service_release_time, key);
    const std::string name = kRolledBackPrefix + key;
    if (!c || !r) {
      checks.push_back({name, true, false, std::monostate{}, std::monostate{},
                        std::string(c ? "the release in service has no release-time estimate of " : "the hold-out has no position of ") +
                            key + ", so the decision cannot show whether the slice recovered"});
      continue;
    }
    const double limit = r->upper + max_slice_regression;
    const bool passed = !(c->lower > limit);
    checks.push_back({name, passed, true, c->lower, limit,
                      passed ? ""
                             : key + " rolled back " + standing.from.record + " (" + standing.record_path +
                                   "); the candidate's " + key + " loss " + interval_text(c->loss, c->lower, c->upper) +
                                   " is still above " + reference + " release-time " +
                                   interval_text(r->loss, r->lower, r->upper) + " + " + num(max_slice_regression) +
                                   ": it cannot promote on this slice until the slice is back within it"});
  }
  return checks;
}

}  // namespace shardtrain
