// The release over time: `release-gate monitor` scores the release in service (the registry's
// last-known-good, named by exact version) on the documents that matured after its release, beside
// its release-time estimates; applies the policy's rollback rules (policy.hpp RollbackRules); and,
// when one fails, moves the in-service pointer back (rollback_target: --rollback-to, else the
// previous known-good, else the policy's fallback baseline), recording why first. `release-gate history --at T` answers what was in service at T, and why, from the same
// records. The formats are in docs/FORMATS.md ("Monitoring record", "Rollback record").
//
// Matured documents: the new snapshot's hold-out with eval_from = `since` (data/selection.hpp: for
// every id, its newest version with event_time > since), i.e. the documents that happened after
// `since` and are available in the new snapshot. `since` defaults to the release's hold-out cutoff;
// a cycle runner passes the previous snapshot's --available-by, so only what arrived after the
// release is scored.
//
// Fail closed: a monitor that cannot score (no last-known-good, a baseline in service: the monitor
// scores releases only, a policy without rollback rules, a rollback target that does not exist, a
// snapshot without any matured document, a missing checkpoint or dataset) throws UsageError or
// IoError naming the thing and what to do (exit 2 or 3) and writes nothing; it never reports
// "keep" without having scored.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/releaseeval/evaluation.hpp"
#include "shardtrain/release/monitoring_record.hpp"
#include "shardtrain/release/policy.hpp"
#include "shardtrain/release/record.hpp"
#include "shardtrain/release/registry.hpp"

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
// let the change through. With a baseline in service the caller passes the rolled-back release's
// own release-time figures (the rule's reference): an n-gram's figures are looser than any trained
// release's and would let a still-regressed slice through. Not applicable when the hold-out or the
// release-time scores have no position of the slice. Pure.
// `reference` names whose release-time figures `in_service_release_time` are, in the reason.
std::vector<CheckResult> rolled_back_slice_checks(const RollbackRecord& standing, const HoldoutSummary& candidate,
                                                  const HoldoutSummary& in_service_release_time,
                                                  double max_slice_regression,
                                                  const std::string& reference = "the release in service's");

// One move of the in-service pointer, as the registry's records tell it.
struct ServiceEvent {
  std::string effective;   // RFC 3339 (microseconds): the time in the record's file name
  std::optional<std::string> record;      // the release record in service from then on (none: a baseline)
  std::optional<std::string> checkpoint;
  std::optional<ServedBaseline> baseline;  // the baseline in service from then on (a rollback's to_baseline)
  std::string cause;       // the release record (a promotion) or the rollback record that moved it
  std::string why;         // one sentence: the promotion, or the rollback with its first reason and the other failed checks by name
  bool operator==(const ServiceEvent&) const = default;
  // {"effective", "record", "checkpoint", "baseline", "cause", "why"} (null where none)
  nlohmann::json to_json() const;
  // "records/<...>.json" or "baseline <name>"
  std::string in_service_name() const;
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

// One line of `release-gate history`: a release record (a decision) or a rollback record, at the
// time in its file name.
struct HistoryEntry {
  std::string effective;  // RFC 3339 (microseconds)
  std::optional<ReleaseRecord> release;    // exactly one of the two
  std::optional<RollbackRecord> rollback;
  // The record's own JSON (its "format" says which kind), with "record_path".
  nlohmann::json to_json() const;
};
// Every release record and rollback record, oldest first (by the time in their file names; a
// record and a rollback in the same microsecond: the record first). Pure.
std::vector<HistoryEntry> registry_history(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks);
// history's table: one row per entry, the baselines, and what is in service now.
std::string history_text(const std::vector<HistoryEntry>& entries, const std::optional<ServiceState>& now,
                         const std::vector<std::string>& baseline_names);
// history --at's answer: "in service at T: <record> (checkpoint ...) since E" or "baseline NAME
// (<model file>, sha256 <12>) since E", and "why: ..." on the next line; or nothing.
std::string in_service_at_text(const std::string& at, const std::optional<ServiceEvent>& event);

}  // namespace shardtrain

namespace shardtrain::release_gate {

// Where a release that must go is put back, in this order:
//   1. `rollback_to`: "records/<...>.json" (a release that was promoted, not `current`) or
//      "baseline:NAME" (a registered baseline);
//   2. the previous known-good of `current` (its record's previous_last_known_good);
//   3. the policy's rollback.fallback_baseline (RollbackRules), a registered baseline;
//   4. nowhere: nullopt (the monitor records rollback_blocked).
// A name that does not exist (a record, a baseline: the registered ones are listed) throws
// UsageError; the monitor resolves this before it scores, so such a run writes nothing.
struct RollbackTarget {
  std::optional<ReleaseRecord> release;    // exactly one of release and baseline
  std::optional<ServedBaseline> baseline;
  std::string reason;                      // how it was chosen (the rollback record's to_reason)
};
inline constexpr const char* kRollbackToBaselinePrefix = "baseline:";
std::optional<RollbackTarget> rollback_target(const ReleaseRegistry& registry, const ReleaseRecord& current,
                                              const std::string& rollback_to, const RollbackRules& rules);

struct MonitorOptions {
  std::string registry, policy_path;
  std::string data_path;          // the new snapshot (data-prep)
  std::string since;              // RFC 3339; "" = the release's hold-out cutoff
  std::string data_prep_summary;  // the new snapshot's data-prep summary (rejected records); "" = none
  std::string run_dir;            // recorded (a cycle's folder); "" = none
  std::string rollback_to;        // "records/<...>.json" or "baseline:NAME"; "" = rollback_target's order
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
