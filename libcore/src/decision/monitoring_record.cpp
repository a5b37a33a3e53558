#include "shardtrain/decision/monitoring_record.hpp"

#include "shardtrain/base/json_fields.hpp"

namespace shardtrain {
namespace {

using json_fields::field;
using json_fields::or_null;

// A stored summary drops the per-sequence losses (a monitoring record is about slices and intervals).
HoldoutSummary without_per_sequence(HoldoutSummary s) {
  s.per_sequence.reset();
  return s;
}

}  // namespace

nlohmann::json ReleaseRef::to_json() const {
  return {{"record", record}, {"checkpoint", checkpoint}, {"manifest_sha256", manifest_sha256}};
}

ReleaseRef ReleaseRef::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.string(field(at, "record")), f.string(field(at, "checkpoint")), f.string(field(at, "manifest_sha256"))};
}

nlohmann::json ServedBaseline::to_json() const {
  return {{"name", name}, {"file", file}, {"model_file", model_file}, {"sha256", sha256}};
}

ServedBaseline ServedBaseline::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.string(field(at, "name")), f.string(field(at, "file")), f.string(field(at, "model_file")),
          f.string(field(at, "sha256"))};
}

nlohmann::json MonitoredRelease::to_json() const {
  nlohmann::json j = release.to_json();
  j["step"] = step;
  j["data_snapshot_id"] = data_snapshot_id;
  j["training_cutoff"] = training_cutoff;
  j["holdout_cutoff"] = holdout_cutoff;
  j["policy_version"] = policy_version;
  j["policy_sha256"] = policy_sha256;
  return j;
}

MonitoredRelease MonitoredRelease::from_json(const JsonFile& f, const std::string& at) {
  MonitoredRelease m;
  m.release = ReleaseRef::from_json(f, at);
  m.step = json_fields::integer(f, field(at, "step"));
  m.data_snapshot_id = f.string(field(at, "data_snapshot_id"));
  m.training_cutoff = f.string(field(at, "training_cutoff"));
  m.holdout_cutoff = f.string(field(at, "holdout_cutoff"));
  m.policy_version = f.string(field(at, "policy_version"));
  m.policy_sha256 = f.string(field(at, "policy_sha256"));
  return m;
}

nlohmann::json InputQuality::to_json() const {
  return {{"drift_jsd_bits", drift_jsd_bits},         {"training_data", training_data},
          {"training_cutoff", training_cutoff},       {"training_documents", training_documents},
          {"training_tokens", training_tokens},       {"matured_documents", matured_documents},
          {"matured_tokens", matured_tokens},         {"rejected_records", or_null(rejected_records)},
          {"not_yet_available", or_null(not_yet_available)}};
}

InputQuality InputQuality::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  InputQuality q;
  q.drift_jsd_bits = f.number(field(at, "drift_jsd_bits"));
  q.training_data = f.string(field(at, "training_data"));
  q.training_cutoff = f.string(field(at, "training_cutoff"));
  q.training_documents = json_fields::count(f, field(at, "training_documents"));
  q.training_tokens = json_fields::count(f, field(at, "training_tokens"));
  q.matured_documents = json_fields::count(f, field(at, "matured_documents"));
  q.matured_tokens = json_fields::count(f, field(at, "matured_tokens"));
  q.rejected_records = json_fields::null_or(f, field(at, "rejected_records"), json_fields::count);
  q.not_yet_available = json_fields::null_or(f, field(at, "not_yet_available"), json_fields::count);
  return q;
}

nlohmann::json MonitoringRecord::to_json() const {
  CheckpointEvaluation m = matured;
  m.scores = without_per_sequence(m.scores);
  nlohmann::json j = {{"format", kMonitoringRecordFormat},
                      {"format_version", format_version},
                      {"release", release.to_json()},
                      {"since", since},
                      {"matured", m.to_json()},
                      {"release_time", without_per_sequence(release_time).to_json()},
                      {"input_quality", input_quality.to_json()},
                      {"checks", json_fields::array_of(checks)},
                      {"verdict", verdict},
                      {"policy", {{"path", policy_path}, {"version", policy_version}, {"sha256", policy_sha256}}},
                      {"run_dir", run_dir},
                      {"monitored", monitored},
                      {"release_gate_version", release_gate_version}};
  if (!record_path.empty()) j["record_path"] = record_path;
  return j;
}

MonitoringRecord MonitoringRecord::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_format(f, at, kMonitoringRecordFormat, "monitoring record");
  MonitoringRecord r;
  r.format_version = json_fields::small_integer(f, field(at, "format_version"));
  r.release = MonitoredRelease::from_json(f, field(at, "release"));
  r.since = f.string(field(at, "since"));
  r.matured = CheckpointEvaluation::from_json(f, field(at, "matured"));
  r.release_time = HoldoutSummary::from_json(f, field(at, "release_time"));
  r.input_quality = InputQuality::from_json(f, field(at, "input_quality"));
  r.checks = json_fields::objects<CheckResult>(f, field(at, "checks"));
  r.verdict = f.string(field(at, "verdict"));
  if (r.verdict != kVerdictKeep && r.verdict != kVerdictRolledBack && r.verdict != kVerdictRollbackBlocked)
    f.fail("field " + field(at, "verdict") + " is '" + r.verdict + "', not keep, rolled_back or rollback_blocked");
  r.policy_path = f.string(field(at, "policy/path"));
  r.policy_version = f.string(field(at, "policy/version"));
  r.policy_sha256 = f.string(field(at, "policy/sha256"));
  r.run_dir = f.string(field(at, "run_dir"));
  r.monitored = f.string(field(at, "monitored"));
  r.release_gate_version = f.string(field(at, "release_gate_version"));
  if (f.has(field(at, "record_path"))) r.record_path = f.string(field(at, "record_path"));
  return r;
}

nlohmann::json RollbackRecord::to_json() const {
  nlohmann::json j = {{"format", kRollbackRecordFormat},
                      {"format_version", format_version},
                      {"from", from.to_json()},
                      {"to", to ? to->to_json() : nlohmann::json(nullptr)},
                      {"to_baseline", to_baseline ? to_baseline->to_json() : nlohmann::json(nullptr)},
                      {"to_reason", to_reason},
                      {"monitoring_record", monitoring_record},
                      {"reasons", reasons},
                      {"evidence", json_fields::array_of(evidence)},
                      {"slices", slices},
                      {"policy", {{"version", policy_version}, {"sha256", policy_sha256}}},
                      {"review", review.to_json()},
                      {"run_dir", run_dir},
                      {"rolled_back", rolled_back},
                      {"release_gate_version", release_gate_version}};
  if (!record_path.empty()) j["record_path"] = record_path;
  return j;
}

RollbackRecord RollbackRecord::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_format(f, at, kRollbackRecordFormat, "rollback record");
  RollbackRecord r;
  r.format_version = json_fields::small_integer(f, field(at, "format_version"));
  r.from = ReleaseRef::from_json(f, field(at, "from"));
  if (r.format_version < 1 || r.format_version > kRollbackRecordVersion)
    f.fail("field " + field(at, "format_version") + " is " + std::to_string(r.format_version) + ", not 1 to " +
           std::to_string(kRollbackRecordVersion) + " (written by a newer release-gate?)");
  if (r.format_version == 1) {
    r.to = ReleaseRef::from_json(f, field(at, "to"));  // version 1 always put a release back
  } else {
    r.to = json_fields::null_or(f, field(at, "to"), ReleaseRef::from_json);
    r.to_baseline = json_fields::null_or(f, field(at, "to_baseline"), ServedBaseline::from_json);
    if (r.to.has_value() == r.to_baseline.has_value())
      f.fail("fields " + field(at, "to") + " and " + field(at, "to_baseline") +
             ": exactly one must name what was put back (the other null)");
  }
  r.to_reason = f.string(field(at, "to_reason"));
  r.monitoring_record = f.string(field(at, "monitoring_record"));
  r.reasons = json_fields::strings(f, field(at, "reasons"));
  r.evidence = json_fields::objects<CheckResult>(f, field(at, "evidence"));
  r.slices = json_fields::strings(f, field(at, "slices"));
  r.policy_version = f.string(field(at, "policy/version"));
  r.policy_sha256 = f.string(field(at, "policy/sha256"));
  r.review = ReviewNeed::from_json(f, field(at, "review"));
  r.run_dir = f.string(field(at, "run_dir"));
  r.rolled_back = f.string(field(at, "rolled_back"));
  r.release_gate_version = f.string(field(at, "release_gate_version"));
  if (f.has(field(at, "record_path"))) r.record_path = f.string(field(at, "record_path"));
  return r;
}

std::string RollbackRecord::to_name() const {
  if (to_baseline) return "baseline " + to_baseline->name;
  return to ? to->record : std::string("nothing");
}

nlohmann::json ReviewSignOff::to_json() const {
  nlohmann::json j = {{"format", kReviewFormat}, {"format_version", 1}, {"record", record},
                      {"by", by},              {"note", note},         {"signed_off", signed_off}};
  if (!record_path.empty()) j["record_path"] = record_path;
  return j;
}

ReviewSignOff ReviewSignOff::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_format(f, at, kReviewFormat, "review sign-off");
  ReviewSignOff r{f.string(field(at, "record")), f.string(field(at, "by")), f.string(field(at, "note")),
                  f.string(field(at, "signed_off")), ""};
  if (f.has(field(at, "record_path"))) r.record_path = f.string(field(at, "record_path"));
  return r;
}

}  // namespace shardtrain
