#include "shardtrain/decision/record.hpp"

#include <cstdio>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"

namespace shardtrain {
namespace {

using json_fields::field;

using json_fields::or_null;

void put_if(nlohmann::json& j, const char* key, const std::optional<std::string>& v) {
  if (v) j[key] = *v;
}

using json_fields::array_of;

}  // namespace

nlohmann::json RecordData::to_json() const {
  return {{"dataset", dataset},
          {"dataset_snapshot_id", dataset_snapshot_id},
          {"holdout_selection_snapshot_id", holdout_selection_snapshot_id},
          {"cutoff", cutoff},
          {"training_selection_snapshot_id", training_selection_snapshot_id},
          {"training_cutoff", training_cutoff}};
}

RecordData RecordData::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.string(field(at, "dataset")),
          f.string(field(at, "dataset_snapshot_id")),
          f.string(field(at, "holdout_selection_snapshot_id")),
          f.string(field(at, "cutoff")),
          f.string(field(at, "training_selection_snapshot_id")),
          f.string(field(at, "training_cutoff"))};
}

nlohmann::json DatasetSource::to_json() const { return {{"path", path}, {"sha256", sha256}, {"bytes", bytes}}; }

DatasetSource DatasetSource::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.string(field(at, "path")), f.string(field(at, "sha256")), json_fields::count(f, field(at, "bytes"))};
}

nlohmann::json TransformationState::to_json() const {
  return {{"created_by", created_by},       {"tokenizer", tokenizer},     {"vocab", vocab},
          {"separator_token", separator_token}, {"token_bits", token_bits}, {"data_prep", data_prep},
          {"synthetic_spec", synthetic_spec}, {"sources", array_of(sources)}};
}

TransformationState TransformationState::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  TransformationState t;
  t.created_by = f.string(field(at, "created_by"));
  t.tokenizer = f.string(field(at, "tokenizer"));
  t.vocab = json_fields::integer(f, field(at, "vocab"));
  t.separator_token = json_fields::integer(f, field(at, "separator_token"));
  t.token_bits = json_fields::small_integer(f, field(at, "token_bits"));
  t.data_prep = f.at(field(at, "data_prep"));
  t.synthetic_spec = f.at(field(at, "synthetic_spec"));
  t.sources = json_fields::objects<DatasetSource>(f, field(at, "sources"));
  return t;
}

nlohmann::json Artifact::to_json() const {
  return {{"folder", folder}, {"step", step}, {"manifest_sha256", manifest_sha256}, {"files", array_of(files)}};
}

Artifact Artifact::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.string(field(at, "folder")), json_fields::integer(f, field(at, "step")),
          f.string(field(at, "manifest_sha256")), json_fields::objects<CheckpointFile>(f, field(at, "files"))};
}

nlohmann::json BaselineRef::to_json() const {
  nlohmann::json j = {{"name", name}, {"kind", kind}};
  put_if(j, "record", record);
  put_if(j, "checkpoint", checkpoint);
  put_if(j, "file", file);
  return j;
}

BaselineRef BaselineRef::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.string(field(at, "name")), f.string(field(at, "kind")), json_fields::nullable_string(f, field(at, "record")),
          json_fields::nullable_string(f, field(at, "checkpoint")), json_fields::nullable_string(f, field(at, "file"))};
}

nlohmann::json InService::to_json() const {
  nlohmann::json j = {{"name", name}, {"checkpoint", or_null(checkpoint)}};
  put_if(j, "kind", kind);
  put_if(j, "record", record);
  put_if(j, "file", file);
  return j;
}

InService InService::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  (void)f.at(field(at, "checkpoint"));  // always there, null when nothing is
  return {f.string(field(at, "name")), json_fields::nullable_string(f, field(at, "checkpoint")),
          json_fields::nullable_string(f, field(at, "kind")), json_fields::nullable_string(f, field(at, "record")),
          json_fields::nullable_string(f, field(at, "file"))};
}

nlohmann::json ReleaseRecord::to_json() const {
  nlohmann::json j = {
      {"format", kReleaseRecordFormat},
      {"format_version", format_version},
      {"decision", promote ? "promote" : "reject"},
      {"reasons", reasons},
      {"checks", array_of(checks)},
      {"data", data.to_json()},
      {"transformation", transformation.to_json()},
      {"artifact", artifact.to_json()},
      {"model", model},
      {"run_config", run_config},
      {"code_version", code_version},
      {"scores", {{"candidate", candidate.to_json()}, {"baseline", baseline_evaluation.to_json()}}},
      {"rubric", rubric.to_json()},
      {"costs", costs ? costs->to_json() : nlohmann::json(nullptr)},
      {"policy", policy.to_json()},
      {"baseline", baseline.to_json()},
      {"previous_last_known_good", or_null(previous_last_known_good)},
      {"in_service", in_service.to_json()},
      {"dry_run", dry_run},
      {"release_gate_version", release_gate_version},
      {"started", started},
      {"decided", decided},
      {"review", review.to_json()}};
  if (utility) j["utility"] = utility->to_json();
  if (!record_path.empty()) j["record_path"] = record_path;
  return j;
}

ReleaseRecord ReleaseRecord::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_format(f, at, kReleaseRecordFormat, "release record");
  ReleaseRecord r;
  r.format_version = json_fields::small_integer(f, field(at, "format_version"));
  const std::string decision = f.string(field(at, "decision"));
  if (decision != "promote" && decision != "reject")
    f.fail("field " + field(at, "decision") + " is '" + decision + "', neither \"promote\" nor \"reject\"");
  r.promote = decision == "promote";
  r.reasons = json_fields::strings(f, field(at, "reasons"));
  r.checks = json_fields::objects<CheckResult>(f, field(at, "checks"));
  r.data = RecordData::from_json(f, field(at, "data"));
  r.transformation = TransformationState::from_json(f, field(at, "transformation"));
  r.artifact = Artifact::from_json(f, field(at, "artifact"));
  r.model = f.at(field(at, "model"));
  r.run_config = f.at(field(at, "run_config"));
  r.code_version = f.string(field(at, "code_version"));
  r.candidate = CheckpointEvaluation::from_json(f, field(at, "scores/candidate"));
  r.baseline_evaluation = CheckpointEvaluation::from_json(f, field(at, "scores/baseline"));
  r.rubric = RubricScore::from_json(f, field(at, "rubric"));
  if (f.has(field(at, "utility"))) r.utility = UtilityEstimate::from_json(f, field(at, "utility"));
  if (f.has(field(at, "costs")) && !f.at(field(at, "costs")).is_null()) {
    // The embedded table keeps the path of the costs.json it came from; an error in it names this
    // record and the field first (the file being read is the one to mend).
    const nlohmann::json& c = f.at(field(at, "costs"));
    const std::string costs_at = field(at, "costs");
    if (c.is_object() && c.contains("path") && !c.at("path").is_string())
      throw UsageError(f.path() + ": field " + costs_at + "/path is not a string (got " + c.at("path").dump() + ")");
    try {
      r.costs = CostTable::from_json(c, c.is_object() ? c.value("path", f.path()) : f.path());
    } catch (const UsageError& e) {
      throw UsageError(f.path() + ": field " + costs_at + ": " + e.what());
    }
  }
  r.policy = ReleasePolicy::from_json(f, field(at, "policy"));
  r.baseline = BaselineRef::from_json(f, field(at, "baseline"));
  (void)f.at(field(at, "previous_last_known_good"));  // null when there was none
  r.previous_last_known_good = json_fields::nullable_string(f, field(at, "previous_last_known_good"));
  r.in_service = InService::from_json(f, field(at, "in_service"));
  r.dry_run = json_fields::boolean(f, field(at, "dry_run"));
  r.release_gate_version = f.string(field(at, "release_gate_version"));
  r.started = f.string(field(at, "started"));
  r.decided = f.string(field(at, "decided"));
  if (f.has(field(at, "review"))) r.review = ReviewNeed::from_json(f, field(at, "review"));
  if (f.has(field(at, "record_path"))) r.record_path = f.string(field(at, "record_path"));
  return r;
}

namespace {
std::string check_text(const CheckValue& v) {
  if (const double* d = std::get_if<double>(&v)) {
    char b[40];
    std::snprintf(b, sizeof b, "%.6g", *d);
    return b;
  }
  if (const std::string* t = std::get_if<std::string>(&v)) return *t;
  return "-";
}
}  // namespace

ModelCardRelease model_card_release(const ReleaseRecord& r) {
  ModelCardRelease c;
  c.promote = r.promote;
  c.decided = r.decided;
  c.record_path = r.record_path;
  c.reasons = r.reasons;
  const HoldoutSummary& s = r.candidate.scores;
  c.holdout = ModelCardRelease::Holdout{r.candidate.holdout.selection_snapshot_id, r.candidate.holdout.cutoff,
                                        s.sequences, s.tokens, s.loss, s.interval.lower, s.interval.upper,
                                        s.perplexity};
  for (const CheckResult& k : r.checks)
    if (k.applicable) c.checks.push_back({k.name, check_text(k.value), check_text(k.limit), k.passed});
  return c;
}

}  // namespace shardtrain
