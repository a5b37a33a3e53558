// The result of a release evaluation (releaseeval/evaluation.hpp): of a checkpoint, or of an n-gram
// baseline, on the temporal hold-out. What `release-gate eval` writes as evaluation.json, what a
// registered baseline and a release record keep, and what the policy checks, the utility and the
// report read. docs/FORMATS.md ("Release evaluation") lists the fields; the JSON keys below are
// that format's and must not change (scripts and jq users read them).
//
// One struct for both kinds: they share the hold-out identity and the scores (the same code
// measured the same positions, so they compare); a checkpoint adds its identity, the latency probe,
// the wall time and the training run's figures, an n-gram its order and counted tokens.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/stats/holdout_scores.hpp"

namespace shardtrain {

inline constexpr const char* kCheckpointEvaluation = "checkpoint";
inline constexpr const char* kNgramEvaluation = "ngram";

// Which positions were scored. Two evaluations compare only when every field but `data` (the
// path the dataset was named by) is equal: same_positions().
struct HoldoutIdentity {
  std::string data, dataset_snapshot_id, selection_snapshot_id;
  std::string cutoff;  // RFC 3339: the hold-out is the documents after it
  int seq_len = 0, max_samples = 0;
  std::uint64_t samples = 0, documents = 0;
  bool same_positions(const HoldoutIdentity& other) const;
  bool operator==(const HoldoutIdentity&) const = default;
  static auto fields() {
    using namespace json_fields;
    using H = HoldoutIdentity;
    return std::tuple{key("data", &H::data), key("dataset_snapshot_id", &H::dataset_snapshot_id),
                      key("selection_snapshot_id", &H::selection_snapshot_id), key("cutoff", &H::cutoff),
                      key("seq_len", &H::seq_len), key("max_samples", &H::max_samples), key("samples", &H::samples),
                      key("documents", &H::documents)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }  // for messages (the policy's)
};

struct CheckpointFile {
  std::string name, sha256;
  std::int64_t bytes = 0;
  bool operator==(const CheckpointFile&) const = default;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("name", &CheckpointFile::name), key("sha256", &CheckpointFile::sha256),
                      key("bytes", &CheckpointFile::bytes)};
  }
  // The list's write and read, for the callers that name the pair (the release record's artifact).
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static CheckpointFile from_json(const JsonFile& file, const std::string& at) { return json_fields::read<CheckpointFile>(file, at); }
};

// The evaluated checkpoint, from its validated manifest.
struct CheckpointIdentity {
  std::string folder;  // absolute, normalised
  std::int64_t step = 0;
  std::string manifest_sha256;
  std::vector<CheckpointFile> files;
  // The manifest's model config and run config as it has them (ckpt/format.hpp): copied, not read.
  nlohmann::json model = nlohmann::json::object(), config = nlohmann::json::object();
  std::string data_snapshot_id, data_cutoff, code_version;  // data_cutoff "" when trained on everything
  bool operator==(const CheckpointIdentity&) const = default;
  static auto fields() {
    using namespace json_fields;
    using C = CheckpointIdentity;
    return std::tuple{key("folder", &C::folder), key("step", &C::step), key("manifest_sha256", &C::manifest_sha256),
                      key("files", &C::files), key("model", &C::model), key("config", &C::config),
                      key("data_snapshot_id", &C::data_snapshot_id), key("data_cutoff", &C::data_cutoff),
                      key("code_version", &C::code_version)};
  }
};

// The latency probe: `runs` timed forwards of `batch` sequences after one warm-up.
struct LatencyProbe {
  int batch = 0, runs = 0, threads = 0;
  double ms_per_sequence_p50 = 0, ms_per_sequence_p99 = 0;
  double forward_tokens_per_s = 0;  // scored positions / seconds in the scoring forwards
  bool operator==(const LatencyProbe&) const = default;
  static auto fields() {
    using namespace json_fields;
    using L = LatencyProbe;
    return std::tuple{key("batch", &L::batch), key("runs", &L::runs), key("threads", &L::threads),
                      key("ms_per_sequence_p50", &L::ms_per_sequence_p50), key("ms_per_sequence_p99", &L::ms_per_sequence_p99),
                      key("forward_tokens_per_s", &L::forward_tokens_per_s)};
  }
};

// The training run's figures from its summary.json (absent there: nothing, null in JSON).
struct TrainingFigures {
  std::string summary;  // the summary's path
  std::optional<double> throughput_tokens_per_s, scaling_efficiency, mfu;
  std::optional<std::int64_t> world_size;
  bool operator==(const TrainingFigures&) const = default;
  static auto fields() {
    using namespace json_fields;
    using T = TrainingFigures;
    return std::tuple{key("summary", &T::summary), key("throughput_tokens_per_s", &T::throughput_tokens_per_s, kMayBeAbsent),
                      key("scaling_efficiency", &T::scaling_efficiency, kMayBeAbsent),
                      key("world_size", &T::world_size, kMayBeAbsent), key("mfu", &T::mfu, kMayBeAbsent)};
  }
};

struct CheckpointEvaluation {
  std::string kind = kCheckpointEvaluation;  // "checkpoint" or "ngram"
  HoldoutIdentity holdout;
  HoldoutSummary scores;
  // kind "checkpoint" only:
  CheckpointIdentity checkpoint;
  LatencyProbe latency;
  std::optional<TrainingFigures> training;  // null: no summary.json beside the checkpoints
  double seconds = 0;                       // wall time of the whole evaluation
  double evaluated_tokens_per_s = 0;        // scored positions / seconds
  // kind "ngram" only:
  int order = 0;
  std::uint64_t counted_tokens = 0;

  bool is_checkpoint() const { return kind == kCheckpointEvaluation; }
  bool operator==(const CheckpointEvaluation&) const = default;  // the other kind's fields stay default
  // Both kinds' keys, then each kind's own: a list per part, as the JSON has them by kind.
  static auto common_fields() {
    using namespace json_fields;
    using E = CheckpointEvaluation;
    return std::tuple{key("kind", &E::kind, read_kind), key("holdout", &E::holdout), key("scores", &E::scores)};
  }
  static auto checkpoint_fields() {
    using namespace json_fields;
    using E = CheckpointEvaluation;
    return std::tuple{key("checkpoint", &E::checkpoint), key("latency", &E::latency), key("training", &E::training),
                      key("seconds", &E::seconds), key("evaluated_tokens_per_s", &E::evaluated_tokens_per_s)};
  }
  static auto ngram_fields() {
    using namespace json_fields;
    return std::tuple{key("order", &CheckpointEvaluation::order), key("counted_tokens", &CheckpointEvaluation::counted_tokens)};
  }
  // "checkpoint" or "ngram"; anything else refused naming the field.
  static std::string read_kind(const JsonFile& file, const std::string& pointer);
  // The common fields and the kind's (written only for its kind).
  nlohmann::json to_json() const;
  // Reads the evaluation at JSON pointer `at` ("" for a whole evaluation.json). Throws UsageError
  // naming the file and the field, or an unknown kind.
  static CheckpointEvaluation from_json(const JsonFile& file, const std::string& at = "");
};

}  // namespace shardtrain
