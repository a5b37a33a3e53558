// The records of the release over time (monitor/monitor.hpp writes them; the registry keeps them,
// decision/registry.hpp): a monitoring record joins what the release in service did on the
// documents that matured after its release to that release by exact version; a rollback record
// says why the in-service pointer moved back, with the evidence, and is committed before the
// pointer moves. Every field is listed in docs/FORMATS.md ("Monitoring record", "Rollback
// record"); the JSON keys below are those formats' and do not change (jq users read them).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"
#include "shardtrain/decision/policy.hpp"

namespace shardtrain {

inline constexpr const char* kMonitoringRecordFormat = "shardtrain-monitoring-record";
inline constexpr const char* kRollbackRecordFormat = "shardtrain-rollback-record";
inline constexpr int kMonitoringRecordVersion = 1;
// 2: "to" may be null, with "to_baseline" naming the registered baseline put in service instead
// (1: "to" always a release, no "to_baseline"; still read).
inline constexpr int kRollbackRecordVersion = 2;
inline constexpr const char* kReviewFormat = "shardtrain-review";

// What a monitoring record's verdict says became of the release in service.
inline constexpr const char* kVerdictKeep = "keep";                    // every rollback check passed
inline constexpr const char* kVerdictRolledBack = "rolled_back";       // a check failed; the pointer moved back
inline constexpr const char* kVerdictRollbackBlocked = "rollback_blocked";  // a check failed, nowhere to go back to
                                                                               // (no previous known-good, no baseline named)

// A release by exact version: its release record and the artifact it names.
struct ReleaseRef {
  std::string record;  // "records/<...>.json", relative to the registry
  std::string checkpoint, manifest_sha256;
  bool operator==(const ReleaseRef&) const = default;
  nlohmann::json to_json() const;  // {"record", "checkpoint", "manifest_sha256"}
  static ReleaseRef from_json(const JsonFile& file, const std::string& at);
};

// A registered baseline (decision/baseline.hpp) put in service by a rollback when there was no
// previous known-good release to put back: by name, its files in the registry, and the sha256 of
// its model file, so a baseline registered again under the same name is not taken for it.
struct ServedBaseline {
  std::string name;
  std::string file;        // "baselines/<name>.json", relative to the registry
  std::string model_file;  // "baselines/<name>.h5"
  std::string sha256;      // of model_file's bytes
  bool operator==(const ServedBaseline&) const = default;
  nlohmann::json to_json() const;  // {"name", "file", "model_file", "sha256"}
  static ServedBaseline from_json(const JsonFile& file, const std::string& at);
};

// The monitored release's exact version, as its release record has it.
struct MonitoredRelease {
  ReleaseRef release;
  std::int64_t step = 0;
  std::string data_snapshot_id;  // the checkpoint's training data (its manifest's data snapshot id)
  std::string training_cutoff;   // RFC 3339, "" when trained on everything
  std::string holdout_cutoff;    // the release-time hold-out's cutoff
  std::string policy_version, policy_sha256;  // the policy it was released under
  bool operator==(const MonitoredRelease&) const = default;
  // ReleaseRef's fields and {"step", "data_snapshot_id", "training_cutoff", "holdout_cutoff",
  //  "policy_version", "policy_sha256"}
  nlohmann::json to_json() const;
  static MonitoredRelease from_json(const JsonFile& file, const std::string& at);
};

// The matured data against what the release was trained on.
struct InputQuality {
  double drift_jsd_bits = 0;  // Jensen-Shannon divergence of the token distributions, base 2, in [0, 1]
  std::string training_data, training_cutoff;  // the selection the release was trained on
  std::uint64_t training_documents = 0, training_tokens = 0;  // tokens of the documents (no separators)
  std::uint64_t matured_documents = 0, matured_tokens = 0;
  // From the new snapshot's data-prep summary when given (null otherwise): input lines rejected,
  // and documents left out for arriving after the snapshot's --available-by.
  std::optional<std::uint64_t> rejected_records, not_yet_available;
  bool operator==(const InputQuality&) const = default;
  // {"drift_jsd_bits", "training_data", "training_cutoff", "training_documents", "training_tokens",
  //  "matured_documents", "matured_tokens", "rejected_records", "not_yet_available"}
  nlohmann::json to_json() const;
  static InputQuality from_json(const JsonFile& file, const std::string& at);
};

struct MonitoringRecord {
  int format_version = kMonitoringRecordVersion;
  MonitoredRelease release;
  std::string since;  // RFC 3339: the matured documents are the new snapshot's with event_time after it
  // The release on the matured documents (kind "checkpoint": hold-out identity, per-slice scores with
  // bootstrap intervals, calibration, the latency probe p50/p99 measured here); per-sequence losses
  // are left out (the record is about slices and intervals).
  CheckpointEvaluation matured;
  HoldoutSummary release_time;  // the release record's own estimates (per-sequence losses left out)
  InputQuality input_quality;
  std::vector<CheckResult> checks;  // decision/rollback_rules.hpp rollback_checks
  std::string verdict;              // kVerdict*
  std::string policy_path, policy_version, policy_sha256;  // the policy the checks applied
  std::string run_dir;              // the folder (a cycle's) that ran the monitor; "" when none was named
  std::string monitored, release_gate_version;  // RFC 3339
  std::string record_path;          // "monitoring/<...>.json": set by the registry, not in the file

  bool operator==(const MonitoringRecord&) const = default;
  // {"format", "format_version", "release", "since", "matured", "release_time", "input_quality",
  //  "checks", "verdict", "policy": {"path", "version", "sha256"}, "run_dir", "monitored",
  //  "release_gate_version"} (and "record_path" when set)
  nlohmann::json to_json() const;
  // Throws UsageError naming the file and the field.
  static MonitoringRecord from_json(const JsonFile& file, const std::string& at = "");
};

struct RollbackRecord {
  int format_version = kRollbackRecordVersion;
  ReleaseRef from;                // the release taken out of service
  // What was put back: a release (`to`), or, when there was no previous known-good, a registered
  // baseline (`to_baseline`). Exactly one is set ("to": null in the file when a baseline is).
  std::optional<ReleaseRef> to;
  std::optional<ServedBaseline> to_baseline;
  // How it was chosen: "the previous known-good of ...", "--rollback-to ...", or "the policy's
  // rollback.fallback_baseline (no previous known-good of ...)".
  std::string to_reason;
  std::string monitoring_record;  // "monitoring/<...>.json": the evidence in full
  std::vector<std::string> reasons;  // "<check>: <sentence>" per failed check
  std::vector<CheckResult> evidence;  // the failed checks
  std::vector<std::string> slices;    // keys of the slices that regressed (a later decide checks them)
  std::string policy_version, policy_sha256;
  ReviewNeed review;
  std::string run_dir;
  std::string rolled_back, release_gate_version;  // RFC 3339
  std::string record_path;  // "rollbacks/<...>.json": set by the registry, not in the file

  bool operator==(const RollbackRecord&) const = default;
  // What was put back, for people: its record path, or "baseline <name>".
  std::string to_name() const;

  // {"format", "format_version", "from", "to", "to_baseline", "to_reason", "monitoring_record",
  //  "reasons", "evidence", "slices", "policy": {"version", "sha256"}, "review", "run_dir",
  //  "rolled_back", "release_gate_version"} (and "record_path" when set)
  nlohmann::json to_json() const;
  // Reads format_version 1 (no "to_baseline": "to" a release) and 2 (exactly one of "to" and
  // "to_baseline" not null); refuses any other version, naming the file.
  static RollbackRecord from_json(const JsonFile& file, const std::string& at = "");
};

// A person's sign-off of a decision that needed review (`release-gate review`): a promotion's
// release record or a rollback record whose `review.required` is true. Kept in reviews/; a decision
// is pending until one names it.
struct ReviewSignOff {
  std::string record;  // "records/<...>.json" or "rollbacks/<...>.json"
  std::string by, note, signed_off;  // who, what they said, RFC 3339
  std::string record_path;           // "reviews/<...>.json": set by the registry, not in the file
  bool operator==(const ReviewSignOff&) const = default;
  nlohmann::json to_json() const;  // {"format", "format_version": 1, "record", "by", "note", "signed_off"}
  static ReviewSignOff from_json(const JsonFile& file, const std::string& at = "");
};

}  // namespace shardtrain
