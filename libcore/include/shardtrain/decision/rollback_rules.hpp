// The rollback rules applied (policy.hpp RollbackRules): the checks `release-gate monitor` runs on
// the release in service, and the ones a later decision must pass while a rollback on slices still
// stands. Pure; the monitor (monitor/monitor.hpp) and the decision (decision.hpp) call them.
#pragma once
#include <string>
#include <vector>

#include "shardtrain/decision/monitoring_record.hpp"
#include "shardtrain/decision/policy.hpp"
#include "shardtrain/stats/holdout_scores.hpp"

namespace shardtrain {

// The rollback rules (policy.hpp RollbackRules) on the release-time and the matured scores: the
// "matured_loss" check, one "slice_regression:<key>" per slice present at both times (a slice only
// matured now is recorded as not applicable), and "drift". Pure.
std::vector<CheckResult> rollback_checks(const RollbackRules& rules, const HoldoutSummary& release_time,
                                         const HoldoutSummary& matured, double drift_jsd_bits);
// True when a rollback check failed: the release must go.
bool must_roll_back(const std::vector<CheckResult>& checks);
// The keys of the failed slice checks ("owner=bob" of "slice_regression:owner=bob").
std::vector<std::string> regressed_slices(const std::vector<CheckResult>& checks);

// What a later decision must show after a rollback on slices: one "rolled_back_slice:<key>" check
// per slice of the standing rollback. The slice must be back within the rule that rolled the
// release back: the check fails when the candidate's slice lower bound exceeds the release in
// service's *release-time* upper bound for that slice + max_slice_regression (the rollback rules').
// Against the release-time figures, not the release in service's score on today's hold-out: when
// the slice's data changed, both may be equally bad there, and "no worse than the fallback" would
// let the change through. With a baseline in service the caller passes the rolled-back release's
// own release-time figures (the rule's reference): an n-gram's figures are looser than any trained
// release's and would let a still-regressed slice through. Not applicable when the hold-out or the
// release-time scores have no position of the slice. Pure.
// `reference` names whose release-time figures `in_service_release_time` are, in the reason.
std::vector<CheckResult> rolled_back_slice_checks(const RollbackRecord& standing, const HoldoutSummary& candidate,
                                                  const HoldoutSummary& in_service_release_time,
                                                  double max_slice_regression,
                                                  const std::string& reference = "the release in service's");

}  // namespace shardtrain
