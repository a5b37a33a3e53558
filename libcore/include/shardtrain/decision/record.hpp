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
  // {"dataset", "dataset_snapshot_id", "holdout_selection_snapshot_id", "cutoff",
  //  "training_selection_snapshot_id", "training_cutoff"}
  nlohmann::json to_json() const;
  static RecordData from_json(const JsonFile& file, const std::string& at);
};

struct DatasetSource {
  std::string path, sha256;
  std::uint64_t bytes = 0;
  bool operator==(const DatasetSource&) const = default;
  nlohmann::json to_json() const;  // {"path", "sha256", "bytes"}
  static DatasetSource from_json(const JsonFile& file, const std::string& at);
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
  // {"created_by", "tokenizer", "vocab", "separator_token", "token_bits", "data_prep", "synthetic_spec", "sources"}
  nlohmann::json to_json() const;
  static TransformationState from_json(const JsonFile& file, const std::string& at);
};

// The candidate's files (from its evaluation's checkpoint identity).
struct Artifact {
  std::string folder;
  std::int64_t step = 0;
  std::string manifest_sha256;
  std::vector<CheckpointFile> files;
  bool operator==(const Artifact&) const = default;
  nlohmann::json to_json() const;  // {"folder", "step", "manifest_sha256", "files"}
  static Artifact from_json(const JsonFile& file, const std::string& at);
};

// What the candidate was compared with: last-known-good {"name", "kind": "checkpoint", "record",
// "checkpoint"}, or a named baseline {"name", "kind", "file"}.
struct BaselineRef {
  std::string name, kind;
  std::optional<std::string> record, checkpoint, file;  // absent keys when nothing
  bool operator==(const BaselineRef&) const = default;
  nlohmann::json to_json() const;
  static BaselineRef from_json(const JsonFile& file, const std::string& at);
};

// What serves after the decision: the candidate {"name": "candidate", "checkpoint", "record"},
// last-known-good {"name", "record", "checkpoint"}, or a named baseline {"name", "kind",
// "checkpoint": null, "file"}.
struct InService {
  std::string name;
  std::optional<std::string> checkpoint;          // always written; null when there is none
  std::optional<std::string> kind, record, file;  // absent keys when nothing
  bool operator==(const InService&) const = default;
  nlohmann::json to_json() const;
  static InService from_json(const JsonFile& file, const std::string& at);
};

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
  nlohmann::json to_json() const;
  // Throws UsageError naming the file and the field (the format, a field missing or mistyped).
  static ReleaseRecord from_json(const JsonFile& file, const std::string& at = "");
};

// What an exported model's card says of this decision (model/hf_model_card.hpp): the decision, its
// reasons, the candidate's hold-out loss with its interval, and the applicable checks.
ModelCardRelease model_card_release(const ReleaseRecord& record);

}  // namespace shardtrain
