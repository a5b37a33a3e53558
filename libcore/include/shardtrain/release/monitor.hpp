// The release over time: `release-gate monitor` scores the release in service (the registry's
// last-known-good, named by exact version) on the documents that matured after its release, beside
// its release-time estimates; applies the policy's rollback rules (policy.hpp RollbackRules); and,
// when one fails, moves the in-service pointer back to the previous known-good, recording why
// first. `release-gate history --at T` answers what was in service at T, and why, from the same
// records. The formats are in docs/FORMATS.md ("Monitoring record", "Rollback record").
//
// Matured documents: the new snapshot's hold-out with eval_from = `since` (data/selection.hpp: for
// every id, its newest version with event_time > since), i.e. the documents that happened after
// `since` and are available in the new snapshot. `since` defaults to the release's hold-out cutoff;
// a cycle runner passes the previous snapshot's --available-by, so only what arrived after the
// release is scored.
//
// Fail closed: a monitor that cannot score (no last-known-good, a policy without rollback rules,
// a snapshot without any matured document, a missing checkpoint or dataset) throws UsageError or
// IoError naming the thing and what to do (exit 2 or 3) and writes nothing; it never reports
// "keep" without having scored.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/release/evaluation.hpp"
#include "shardtrain/release/monitoring_record.hpp"
#include "shardtrain/release/policy.hpp"
#include "shardtrain/release/record.hpp"

namespace shardtrain {

// Jensen-Shannon divergence of two distributions given as non-negative counts over the same
// classes (normalised here): JSD = H(M) - (H(P) + H(Q)) / 2 with M = (P + Q) / 2 and H in bits
// (log base 2), so 0 <= JSD <= 1; 0 * log 0 = 0. Throws UsageError when the lengths differ, a
// count is negative or not finite, or either side sums to 0.
double jensen_shannon_divergence(const std::vector<double>& p, const std::vector<double>& q);

// Token counts of selected documents (separators not counted): per token id in [0, vocab).
struct TokenCounts {
  std::vector<double> counts;
  std::uint64_t documents = 0, tokens = 0;
};
// The documents data/selection.hpp selects from `data_path`: the training selection (available by
// `cutoff`; every document when cutoff is "") or, with holdout set, the hold-out after `cutoff`.
// Throws IoError / UsageError naming the file.
TokenCounts selection_token_counts(const std::string& data_path, const std::string& cutoff, bool holdout);

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
// let the change through. Not applicable when the hold-out or the release-time scores have no
// position of the slice. Pure.
std::vector<CheckResult> rolled_back_slice_checks(const RollbackRecord& standing, const HoldoutSummary& candidate,
                                                  const HoldoutSummary& in_service_release_time,
                                                  double max_slice_regression);

// One move of the in-service pointer, as the registry's records tell it.
struct ServiceEvent {
  std::string effective;   // RFC 3339 (microseconds): the time in the record's file name
  std::string record;      // the release record in service from then on
  std::string checkpoint;
  std::string cause;       // the release record (a promotion) or the rollback record that moved it
  std::string why;         // one sentence
  bool operator==(const ServiceEvent&) const = default;
  nlohmann::json to_json() const;  // {"effective", "record", "checkpoint", "cause", "why"}
};
// The registry's file names start "YYYYMMDDTHHMMSS.ffffffZ" (UTC): that time as RFC 3339 and as
// unix seconds (truncated). UsageError for a name that does not.
std::string registry_stamp_rfc3339(const std::string& record_path);
std::int64_t registry_stamp_seconds(const std::string& record_path);
// An RFC 3339 time as unix microseconds: its fraction's first six digits count (base/time.hpp's
// parse_rfc3339 truncates to the second), so a time copied from an event names that event.
std::int64_t rfc3339_micros(const std::string& text, const std::string& what = "time");
// Every promotion (a release record with decision promote, not a dry run) and every rollback, oldest
// first (by the time in their file names). Pure.
std::vector<ServiceEvent> service_timeline(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks);
// The event in force at `at_micros` (unix microseconds, rfc3339_micros): the newest one whose
// effective time is <= at; nothing before the first promotion.
std::optional<ServiceEvent> in_service_at(const std::vector<ServiceEvent>& timeline, std::int64_t at_micros);
// The rollback that put the current release in service (the timeline's last event is a rollback),
// else nothing: a promotion since clears it.
std::optional<RollbackRecord> standing_rollback(const std::vector<ReleaseRecord>& records,
                                                const std::vector<RollbackRecord>& rollbacks);

}  // namespace shardtrain

namespace shardtrain::release_gate {

struct MonitorOptions {
  std::string registry, policy_path;
  std::string data_path;          // the new snapshot (data-prep)
  std::string since;              // RFC 3339; "" = the release's hold-out cutoff
  std::string data_prep_summary;  // the new snapshot's data-prep summary (rejected records); "" = none
  std::string run_dir;            // recorded (a cycle's folder); "" = none
  std::string rollback_to;        // a promoted release record ("records/<...>.json"); "" = the previous known-good
  ReleaseEvalOptions eval;        // batch, threads, latency probe, bootstrap; holdout.max_samples
  std::optional<int> max_samples; // unset: the release's hold-out max_samples
};

struct MonitorResult {
  MonitoringRecord record;                 // record_path set
  std::optional<RollbackRecord> rollback;  // when the pointer moved back (record_path set)
};

// Scores, records, and rolls back when the policy says so (above). Throws (fail closed) as the
// header says.
MonitorResult monitor_release(const MonitorOptions& options);

// The lines `release-gate monitor` prints: the release, the matured loss beside the release-time
// interval, each slice, drift, calibration, latency, the verdict and where the pointer went.
std::string monitoring_text(const MonitorResult& result);

}  // namespace shardtrain::release_gate
