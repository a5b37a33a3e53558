#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"

#include "shardtrain/base/json_fields.hpp"

namespace shardtrain {
namespace {

using json_fields::field;

using json_fields::or_null;

}  // namespace

bool HoldoutIdentity::same_positions(const HoldoutIdentity& other) const {
  HoldoutIdentity a = *this;
  a.data = other.data;
  return a == other;
}

nlohmann::json HoldoutIdentity::to_json() const {
  return {{"data", data},
          {"dataset_snapshot_id", dataset_snapshot_id},
          {"selection_snapshot_id", selection_snapshot_id},
          {"cutoff", cutoff},
          {"seq_len", seq_len},
          {"max_samples", max_samples},
          {"samples", samples},
          {"documents", documents}};
}

HoldoutIdentity HoldoutIdentity::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  HoldoutIdentity h;
  h.data = f.string(field(at, "data"));
  h.dataset_snapshot_id = f.string(field(at, "dataset_snapshot_id"));
  h.selection_snapshot_id = f.string(field(at, "selection_snapshot_id"));
  h.cutoff = f.string(field(at, "cutoff"));
  h.seq_len = json_fields::small_integer(f, field(at, "seq_len"));
  h.max_samples = json_fields::small_integer(f, field(at, "max_samples"));
  h.samples = json_fields::count(f, field(at, "samples"));
  h.documents = json_fields::count(f, field(at, "documents"));
  return h;
}

nlohmann::json CheckpointFile::to_json() const { return {{"name", name}, {"sha256", sha256}, {"bytes", bytes}}; }

CheckpointFile CheckpointFile::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.string(field(at, "name")), f.string(field(at, "sha256")), json_fields::integer(f, field(at, "bytes"))};
}

nlohmann::json CheckpointIdentity::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& file : files) list.push_back(file.to_json());
  return {{"folder", folder},
          {"step", step},
          {"manifest_sha256", manifest_sha256},
          {"files", list},
          {"model", model},
          {"config", config},
          {"data_snapshot_id", data_snapshot_id},
          {"data_cutoff", data_cutoff},
          {"code_version", code_version}};
}

CheckpointIdentity CheckpointIdentity::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  CheckpointIdentity c;
  c.folder = f.string(field(at, "folder"));
  c.step = json_fields::integer(f, field(at, "step"));
  c.manifest_sha256 = f.string(field(at, "manifest_sha256"));
  const std::string files = field(at, "files");
  for (std::size_t i = 0, n = json_fields::array_size(f, files); i < n; ++i)
    c.files.push_back(CheckpointFile::from_json(f, field(files, std::to_string(i))));
  c.model = f.at(field(at, "model"));
  c.config = f.at(field(at, "config"));
  c.data_snapshot_id = f.string(field(at, "data_snapshot_id"));
  c.data_cutoff = f.string(field(at, "data_cutoff"));
  c.code_version = f.string(field(at, "code_version"));
  return c;
}

nlohmann::json LatencyProbe::to_json() const {
  return {{"batch", batch},
          {"runs", runs},
          {"threads", threads},
          {"ms_per_sequence_p50", ms_per_sequence_p50},
          {"ms_per_sequence_p99", ms_per_sequence_p99},
          {"forward_tokens_per_s", forward_tokens_per_s}};
}

LatencyProbe LatencyProbe::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  LatencyProbe l;
  l.batch = json_fields::small_integer(f, field(at, "batch"));
  l.runs = json_fields::small_integer(f, field(at, "runs"));
  l.threads = json_fields::small_integer(f, field(at, "threads"));
  l.ms_per_sequence_p50 = f.number(field(at, "ms_per_sequence_p50"));
  l.ms_per_sequence_p99 = f.number(field(at, "ms_per_sequence_p99"));
  l.forward_tokens_per_s = f.number(field(at, "forward_tokens_per_s"));
  return l;
}

nlohmann::json TrainingFigures::to_json() const {
  return {{"summary", summary},
          {"throughput_tokens_per_s", or_null(throughput_tokens_per_s)},
          {"scaling_efficiency", or_null(scaling_efficiency)},
          {"world_size", or_null(world_size)},
          {"mfu", or_null(mfu)}};
}

TrainingFigures TrainingFigures::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  TrainingFigures t;
  t.summary = f.string(field(at, "summary"));
  t.throughput_tokens_per_s = f.find_number(field(at, "throughput_tokens_per_s"));
  t.scaling_efficiency = f.find_number(field(at, "scaling_efficiency"));
  t.world_size = json_fields::nullable_integer(f, field(at, "world_size"));
  t.mfu = f.find_number(field(at, "mfu"));
  return t;
}

nlohmann::json CheckpointEvaluation::to_json() const {
  nlohmann::json j = {{"kind", kind}, {"holdout", holdout.to_json()}, {"scores", scores.to_json()}};
  if (is_checkpoint()) {
    j["checkpoint"] = checkpoint.to_json();
    j["latency"] = latency.to_json();
    j["training"] = training ? training->to_json() : nlohmann::json(nullptr);
    j["seconds"] = seconds;
    j["evaluated_tokens_per_s"] = evaluated_tokens_per_s;
  } else {
    j["order"] = order;
    j["counted_tokens"] = counted_tokens;
  }
  return j;
}

CheckpointEvaluation CheckpointEvaluation::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  CheckpointEvaluation e;
  e.kind = f.string(field(at, "kind"));
  if (e.kind != kCheckpointEvaluation && e.kind != kNgramEvaluation)
    f.fail("field " + field(at, "kind") + " is '" + e.kind + "', neither \"checkpoint\" nor \"ngram\"");
  e.holdout = HoldoutIdentity::from_json(f, field(at, "holdout"));
  e.scores = HoldoutSummary::from_json(f, field(at, "scores"));
  if (e.is_checkpoint()) {
    e.checkpoint = CheckpointIdentity::from_json(f, field(at, "checkpoint"));
    e.latency = LatencyProbe::from_json(f, field(at, "latency"));
    if (!f.at(field(at, "training")).is_null()) e.training = TrainingFigures::from_json(f, field(at, "training"));
    e.seconds = f.number(field(at, "seconds"));
    e.evaluated_tokens_per_s = f.number(field(at, "evaluated_tokens_per_s"));
  } else {
    e.order = json_fields::small_integer(f, field(at, "order"));
    e.counted_tokens = json_fields::count(f, field(at, "counted_tokens"));
  }
  return e;
}

}  // namespace shardtrain
