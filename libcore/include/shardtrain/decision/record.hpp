// The release record: one decision of `release-gate decide`, as the registry keeps it
// (<registry>/records/<...>.json, decision/registry.hpp) and as `decide --json` and `history --json`
// print it. Every field is listed in docs/FORMATS.md ("Release record"); the JSON keys below are
// that format's and do not change (tests/scripts/release_gate.sh, scripts/demo.sh, the Slurm chain
// and jq users read them).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/model/hf_model_card.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"
#include "shardtrain/decision/costs.hpp"
#include "shardtrain/decision/policy.hpp"
#include "shardtrain/decision/utility.hpp"

namespace shardtrain {

inline constexpr const char* kReleaseRecordFormat = "shardtrain-release-record";
inline constexpr int kReleaseRecordVersion = 2;  // 2: "utility" and "costs" (absent in 1)

// The data the decision is about: the evaluated dataset and hold-out, and what the checkpoint was
// trained on.
struct RecordData {
  std::string dataset, dataset_snapshot_id, holdout_selection_snapshot_id, cutoff;
  std::string training_selection_snapshot_id, training_cutoff;
  bool operator==(const RecordData&) const = default;
  static auto fields() {
    using namespace json_fields;
    using D = RecordData;
    return std::tuple{key("dataset", &D::dataset), key("dataset_snapshot_id", &D::dataset_snapshot_id),
                      key("holdout_selection_snapshot_id", &D::holdout_selection_snapshot_id), key("cutoff", &D::cutoff),
                      key("training_selection_snapshot_id", &D::training_selection_snapshot_id),
                      key("training_cutoff", &D::training_cutoff)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static RecordData from_json(const JsonFile& f, const std::string& at) { return json_fields::read<RecordData>(f, at); }
};

struct DatasetSource {
  std::string path, sha256;
  std::uint64_t bytes = 0;
  bool operator==(const DatasetSource&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("path", &DatasetSource::path), key("sha256", &DatasetSource::sha256),
                      key("bytes", &DatasetSource::bytes)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static DatasetSource from_json(const JsonFile& f, const std::string& at) { return json_fields::read<DatasetSource>(f, at); }
};

// The transformation state of the evaluated dataset: what data-prep recorded in it.
struct TransformationState {
  std::string created_by, tokenizer;
  std::int64_t vocab = 0, separator_token = 0;
  int token_bits = 0;
  // data-prep's and the synthetic generator's own JSON attributes, copied (null when absent).
  nlohmann::json data_prep, synthetic_spec;
  std::vector<DatasetSource> sources;
  bool operator==(const TransformationState&) const = default;
  static auto fields() {
    using namespace json_fields;
    using T = TransformationState;
    return std::tuple{key("created_by", &T::created_by), key("tokenizer", &T::tokenizer), key("vocab", &T::vocab),
                      key("separator_token", &T::separator_token), key("token_bits", &T::token_bits),
                      key("data_prep", &T::data_prep), key("synthetic_spec", &T::synthetic_spec), key("sources", &T::sources)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static TransformationState from_json(const JsonFile& f, const std::string& at) { return json_fields::read<TransformationState>(f, at); }
};

// The candidate's files (from its evaluation's checkpoint identity).
struct Artifact {
  std::string folder;
  std::int64_t step = 0;
  std::string manifest_sha256;
  std::vector<CheckpointFile> files;
  bool operator==(const Artifact&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("folder", &Artifact::folder), key("step", &Artifact::step),
                      key("manifest_sha256", &Artifact::manifest_sha256), key("files", &Artifact::files)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static Artifact from_json(const JsonFile& f, const std::string& at) { return json_fields::read<Artifact>(f, at); }
};

// What the candidate was compared with: last-known-good {"name", "kind": "checkpoint", "record",
// "checkpoint"}, or a named baseline {"name", "kind", "file"}.
struct BaselineRef {
  std::string name, kind;
  std::optional<std::string> record, checkpoint, file;  // absent keys when nothing
  bool operator==(const BaselineRef&) const = default;
  static auto fields() {
    using namespace json_fields;
    using B = BaselineRef;
    return std::tuple{key("name", &B::name), key("kind", &B::kind), key("record", &B::record, kOmittedWhenEmpty),
                      key("checkpoint", &B::checkpoint, kOmittedWhenEmpty), key("file", &B::file, kOmittedWhenEmpty)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static BaselineRef from_json(const JsonFile& f, const std::string& at) { return json_fields::read<BaselineRef>(f, at); }
};

// What serves after the decision: the candidate {"name": "candidate", "checkpoint", "record"},
// last-known-good {"name", "record", "checkpoint"}, or a named baseline {"name", "kind",
// "checkpoint": null, "file"}.
struct InService {
  std::string name;
  std::optional<std::string> checkpoint;          // always written; null when there is none
  std::optional<std::string> kind, record, file;  // absent keys when nothing
  bool operator==(const InService&) const = default;
  static auto fields() {
    using namespace json_fields;
    using S = InService;
    return std::tuple{key("name", &S::name), key("checkpoint", &S::checkpoint), key("kind", &S::kind, kOmittedWhenEmpty),
                      key("record", &S::record, kOmittedWhenEmpty), key("file", &S::file, kOmittedWhenEmpty)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static InService from_json(const JsonFile& f, const std::string& at) { return json_fields::read<InService>(f, at); }
};

// "decision": a promotion or a reject.
inline constexpr std::pair<const char*, bool> kDecisionNames[] = {{"promote", true}, {"reject", false}};

struct ReleaseRecord {
  int format_version = kReleaseRecordVersion;
  bool promote = false;  // "decision": "promote" or "reject"
  std::vector<std::string> reasons;
  std::vector<CheckResult> checks;
  RecordData data;
  TransformationState transformation;
  Artifact artifact;
  // The checkpoint manifest's model config and run config (ckpt/format.hpp), copied as it has them.
  nlohmann::json model = nlohmann::json::object(), run_config = nlohmann::json::object();
  std::string code_version;
  CheckpointEvaluation candidate, baseline_evaluation;  // "scores": {"candidate", "baseline"}
  RubricScore rubric;
  std::optional<UtilityEstimate> utility;  // absent in format_version 1
  std::optional<CostTable> costs;          // null: the run had no cost table
  ReleasePolicy policy;
  BaselineRef baseline;
  std::optional<std::string> previous_last_known_good;  // its record path; null when there was none
  InService in_service;
  bool dry_run = false;
  std::string release_gate_version, started, decided;  // decided/started: RFC 3339
  // Whether a person must review this decision (the policy's review minutes for a promotion; a
  // reject needs none). Absent in records before the monitor: none.
  ReviewNeed review;
  // Where the registry keeps it ("records/<...>.json"): set once written, and by the registry's
  // readers. Not in the file itself; to_json writes it when set (decide --json, history --json).
  std::string record_path;

  bool operator==(const ReleaseRecord&) const = default;
  // "utility" is absent in format_version 1; "costs" null when none (absent: none); "review" absent
  // in records before the monitor; "record_path" written when set.
  static auto fields() {
    using namespace json_fields;
    using R = ReleaseRecord;
    return std::tuple{
        format_tag("format", kReleaseRecordFormat, "release record"), key("format_version", &R::format_version),
        key("decision", &R::promote, names(kDecisionNames)), key("reasons", &R::reasons), key("checks", &R::checks),
        key("data", &R::data), key("transformation", &R::transformation), key("artifact", &R::artifact),
        key("model", &R::model), key("run_config", &R::run_config), key("code_version", &R::code_version),
        group("scores", key("candidate", &R::candidate), key("baseline", &R::baseline_evaluation)),
        key("rubric", &R::rubric), key("utility", &R::utility, kOmittedWhenEmpty), key("costs", &R::costs, kMayBeAbsent),
        key("policy", &R::policy), key("baseline", &R::baseline), key("previous_last_known_good", &R::previous_last_known_good),
        key("in_service", &R::in_service), key("dry_run", &R::dry_run), key("release_gate_version", &R::release_gate_version),
        key("started", &R::started), key("decided", &R::decided), key("review", &R::review, kMayBeAbsent),
        key("record_path", &R::record_path, kOmittedWhenEmpty)};
  }
  // Throws UsageError naming the file and the field (the format, a field missing or mistyped).
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static ReleaseRecord from_json(const JsonFile& f, const std::string& at = "") { return json_fields::read<ReleaseRecord>(f, at); }
};

// What an exported model's card says of this decision (model/hf_model_card.hpp): the decision, its
// reasons, the candidate's hold-out loss with its interval, and the applicable checks.
ModelCardRelease model_card_release(const ReleaseRecord& record);

}  // namespace shardtrain
