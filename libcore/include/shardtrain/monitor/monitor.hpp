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
//
// Its parts: drift.hpp (the matured tokens against the training selection), the rollback rules
// (decision/rollback_rules.hpp), rollback_target.hpp (where a release that must go is put back),
// and the registry's records (decision/registry.hpp, decision/monitoring_record.hpp).
#pragma once
#include <optional>
#include <string>

#include "shardtrain/decision/monitoring_record.hpp"
#include "shardtrain/releaseeval/evaluation.hpp"

namespace shardtrain::release_gate {


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
