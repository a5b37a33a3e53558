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
#include "shardtrain/base/json_record.hpp"
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
inline constexpr std::pair<const char*, const char*> kVerdictNames[] = {
    {kVerdictKeep, kVerdictKeep}, {kVerdictRolledBack, kVerdictRolledBack}, {kVerdictRollbackBlocked, kVerdictRollbackBlocked}};

// A release by exact version: its release record and the artifact it names.
struct ReleaseRef {
  std::string record;  // "records/<...>.json", relative to the registry
  std::string checkpoint, manifest_sha256;
  bool operator==(const ReleaseRef&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("record", &ReleaseRef::record), key("checkpoint", &ReleaseRef::checkpoint),
                      key("manifest_sha256", &ReleaseRef::manifest_sha256)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static ReleaseRef from_json(const JsonFile& f, const std::string& at) { return json_fields::read<ReleaseRef>(f, at); }
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
  static auto fields() {
    using namespace json_fields;
    using B = ServedBaseline;
    return std::tuple{key("name", &B::name), key("file", &B::file), key("model_file", &B::model_file), key("sha256", &B::sha256)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static ServedBaseline from_json(const JsonFile& f, const std::string& at) { return json_fields::read<ServedBaseline>(f, at); }
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
  static auto fields() {  // ReleaseRef's fields and these
    using namespace json_fields;
    using M = MonitoredRelease;
    return std::tuple{inlined(&M::release), key("step", &M::step), key("data_snapshot_id", &M::data_snapshot_id),
                      key("training_cutoff", &M::training_cutoff), key("holdout_cutoff", &M::holdout_cutoff),
                      key("policy_version", &M::policy_version), key("policy_sha256", &M::policy_sha256)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static MonitoredRelease from_json(const JsonFile& f, const std::string& at) { return json_fields::read<MonitoredRelease>(f, at); }
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
  static auto fields() {
    using namespace json_fields;
    using Q = InputQuality;
    return std::tuple{key("drift_jsd_bits", &Q::drift_jsd_bits), key("training_data", &Q::training_data),
                      key("training_cutoff", &Q::training_cutoff), key("training_documents", &Q::training_documents),
                      key("training_tokens", &Q::training_tokens), key("matured_documents", &Q::matured_documents),
                      key("matured_tokens", &Q::matured_tokens), key("rejected_records", &Q::rejected_records),
                      key("not_yet_available", &Q::not_yet_available)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static InputQuality from_json(const JsonFile& f, const std::string& at) { return json_fields::read<InputQuality>(f, at); }
};

// A stored evaluation or summary without its per-sequence losses (a monitoring record is about
// slices and intervals); read as it is.
template <typename V>
struct WithoutPerSequence {
  V read(const JsonFile& f, const std::string& pointer) const { return json_fields::read_value<V>(f, pointer); }
  nlohmann::json write(V v) const {
    if constexpr (std::is_same_v<V, HoldoutSummary>) v.per_sequence.reset();
    else v.scores.per_sequence.reset();
    return v.to_json();
  }
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
  // "record_path" is written when set.
  static auto fields() {
    using namespace json_fields;
    using M = MonitoringRecord;
    return std::tuple{
        format_tag("format", kMonitoringRecordFormat, "monitoring record"), key("format_version", &M::format_version),
        key("release", &M::release), key("since", &M::since),
        key("matured", &M::matured, WithoutPerSequence<CheckpointEvaluation>{}),
        key("release_time", &M::release_time, WithoutPerSequence<HoldoutSummary>{}),
        key("input_quality", &M::input_quality), key("checks", &M::checks), key("verdict", &M::verdict, names(kVerdictNames)),
        group("policy", key("path", &M::policy_path), key("version", &M::policy_version), key("sha256", &M::policy_sha256)),
        key("run_dir", &M::run_dir), key("monitored", &M::monitored), key("release_gate_version", &M::release_gate_version),
        key("record_path", &M::record_path, kOmittedWhenEmpty)};
  }
  // Throws UsageError naming the file and the field.
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static MonitoringRecord from_json(const JsonFile& f, const std::string& at = "") { return json_fields::read<MonitoringRecord>(f, at); }
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

  // Reads format_version 1 (no "to_baseline": "to" a release) and 2 (exactly one of "to" and
  // "to_baseline" not null); refuses any other version, naming the file. "record_path" is written
  // when set.
  static auto fields() {
    using namespace json_fields;
    using R = RollbackRecord;
    return std::tuple{
        format_tag("format", kRollbackRecordFormat, "rollback record"),
        key("format_version", &R::format_version, versions(1, kRollbackRecordVersion)), key("from", &R::from),
        key("to", &R::to), key("to_baseline", &R::to_baseline, kMayBeAbsent), key("to_reason", &R::to_reason),
        key("monitoring_record", &R::monitoring_record), key("reasons", &R::reasons), key("evidence", &R::evidence),
        key("slices", &R::slices), group("policy", key("version", &R::policy_version), key("sha256", &R::policy_sha256)),
        key("review", &R::review), key("run_dir", &R::run_dir), key("rolled_back", &R::rolled_back),
        key("release_gate_version", &R::release_gate_version), key("record_path", &R::record_path, kOmittedWhenEmpty)};
  }
  void validate(const JsonFile& f, const std::string& at) const;  // exactly one of to and to_baseline
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static RollbackRecord from_json(const JsonFile& f, const std::string& at = "") { return json_fields::read<RollbackRecord>(f, at); }
};

// A person's sign-off of a decision that needed review (`release-gate review`): a promotion's
// release record or a rollback record whose `review.required` is true. Kept in reviews/; a decision
// is pending until one names it.
struct ReviewSignOff {
  std::string record;  // "records/<...>.json" or "rollbacks/<...>.json"
  std::string by, note, signed_off;  // who, what they said, RFC 3339
  std::string record_path;           // "reviews/<...>.json": set by the registry, not in the file
  bool operator==(const ReviewSignOff&) const = default;
  // "format_version" is written (1), not read; "record_path" written when set.
  static auto fields() {
    using namespace json_fields;
    using S = ReviewSignOff;
    return std::tuple{format_tag("format", kReviewFormat, "review sign-off"), constant("format_version", 1),
                      key("record", &S::record), key("by", &S::by), key("note", &S::note), key("signed_off", &S::signed_off),
                      key("record_path", &S::record_path, kOmittedWhenEmpty)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static ReviewSignOff from_json(const JsonFile& f, const std::string& at = "") { return json_fields::read<ReviewSignOff>(f, at); }
};

}  // namespace shardtrain
