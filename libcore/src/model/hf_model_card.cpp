#include "shardtrain/model/hf_model_card.hpp"

#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>

#include "shardtrain/model/config.hpp"

namespace shardtrain {

namespace {

std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

std::string value_text(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_number_float()) return num(v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

const nlohmann::json& get(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null;
  return j.is_object() && j.contains(key) ? j.at(key) : null;
}

std::string base_name(const std::string& path) {
  const std::filesystem::path p(path);
  return p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
}

// A record's sentences name files by their local path: keep only the last component.
std::string without_paths(const std::string& s) {
  static const std::regex absolute("(/[^/\\s:()'\",]+)+/([^/\\s:()'\",]+)");
  return std::regex_replace(s, absolute, "$2");
}

// Table cells must not break the Markdown table (nor carry a local path).
std::string cell(std::string s) {
  std::string out;
  for (char c : without_paths(s)) {
    if (c == '|') out += '\\';  // Markdown's escaped pipe
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

void release_section(std::ostringstream& o, const ModelCardInputs& in) {
  o << "## Evaluation and release\n\n";
  if (!in.release) {
    o << "No release record of this checkpoint: " << in.registry_note << ".\n\n";
    return;
  }
  const ModelCardRelease& r = *in.release;
  o << "Release decision: **" << (r.promote ? "promote" : "reject") << "** (release-gate, decided " << r.decided
    << ", record `" << base_name(r.record_path) << "`).\n\n";
  for (const auto& reason : r.reasons) o << "- " << cell(reason) << "\n";
  if (!r.reasons.empty()) o << "\n";
  if (r.holdout) {
    const ModelCardRelease::Holdout& h = *r.holdout;
    o << "Hold-out (data selection snapshot `" << h.selection_snapshot_id << "`, cutoff " << h.cutoff << ", "
      << h.sequences << " sequences, " << num(h.tokens) << " tokens): loss " << num(h.loss)
      << " nats/token (95% interval " << num(h.lower) << " .. " << num(h.upper) << "), perplexity "
      << num(h.perplexity) << ".\n\n";
  }
  if (!r.checks.empty()) {
    o << "| check | passed | value | limit |\n|---|---|---|---|\n";
    for (const auto& c : r.checks)
      o << "| " << cell(c.name) << " | " << (c.passed ? "true" : "false") << " | " << cell(c.value) << " | "
        << cell(c.limit) << " |\n";
    o << "\n";
  }
}

}  // namespace

std::string hf_model_card(const ModelCardInputs& in) {
  const ckpt::CheckpointManifest& m = *in.manifest;
  const ModelConfig model = ModelConfig::from_json(m.model);
  const nlohmann::json& c = m.config;
  std::ostringstream o;
  o << "---\nlibrary_name: transformers\npipeline_tag: text-generation\ntags:\n- gpt2\n- shardtrain\n---\n\n";
  o << "# " << in.checkpoint_name << " (shardtrain GPT-2)\n\n";
  o << "A GPT-2 decoder trained with shardtrain and exported by `ckpt-reshard --export hf` (" << in.dtype
    << " weights). Everything below is read from the checkpoint's manifest"
    << (in.release ? " and its release record" : "") << ".\n\n";
  o << "## Checkpoint\n\n";
  o << "| | |\n|---|---|\n";
  o << "| checkpoint | `" << in.checkpoint_name << "` |\n";
  o << "| step | " << m.step << " |\n";
  o << "| tokens seen | " << m.tokens_seen << " |\n";
  o << "| manifest SHA-256 | " << (in.manifest_sha256.empty() ? "-" : "`" + in.manifest_sha256 + "`") << " |\n";
  o << "| code version | `" << m.code_version << "` |\n";
  o << "| written | " << m.created << " |\n\n";
  o << "## Training data\n\n";
  o << "| | |\n|---|---|\n";
  o << "| data selection snapshot id | `" << m.data_snapshot_id << "` |\n";
  o << "| cutoff | " << (m.data_cutoff.empty() ? "none (every document)" : m.data_cutoff) << " |\n";
  o << "| dataset snapshot id | `" << value_text(get(m.extra, "dataset_snapshot_id")) << "` |\n";
  const std::string eval_from = value_text(get(m.extra, "eval_from"));
  o << "| hold-out from | " << (eval_from.empty() || eval_from == "-" ? "the cutoff" : eval_from) << " |\n";
  o << "| tokenizer | " << cell(in.tokenizer) << " |\n\n";
  o << "## Model\n\n";
  o << "| vocabulary | context | d_model | layers | heads | parameters |\n|---|---|---|---|---|---|\n";
  o << "| " << model.vocab << " | " << model.seq_len << " | " << model.d_model << " | " << model.n_layer << " | "
    << model.n_head << " | " << model.parameter_count() << " |\n\n";
  o << "GPT-2 architecture: learned positions, pre-LayerNorm blocks (eps 1e-5), tanh GELU (`gelu_new`), "
       "LM head tied to the token embedding.\n\n";
  o << "## Training configuration\n\n";
  o << "| | |\n|---|---|\n";
  o << "| global batch (sequences) | " << m.global_batch << " = micro " << m.micro_batch << " x accumulation "
    << m.grad_accum << " x data-parallel " << m.layout.dp << " |\n";
  o << "| optimizer | `" << cell(value_text(get(c, "optimizer"))) << "` |\n";
  o << "| learning rate at this step | " << num(m.lr) << " |\n";
  o << "| seed | " << value_text(get(c, "seed")) << " |\n";
  o << "| deterministic mode | " << value_text(get(c, "deterministic")) << " |\n\n";
  o << "## Layout\n\n";
  o << "| world size | data-parallel | tensor-parallel | ZeRO stage | rank files |\n|---|---|---|---|---|\n";
  o << "| " << m.layout.world_size << " | " << m.layout.dp << " | " << m.layout.tp << " | " << m.layout.zero_stage
    << " | " << m.writers << " |\n\n";
  if (!m.history.empty()) {
    o << "Rewritten " << m.history.size() << " time(s) by ckpt-reshard since training (earlier layouts:";
    for (const auto& h : m.history)
      o << " " << value_text(get(h, "operation")) << " from world " << value_text(get(get(h, "layout"), "world_size"));
    o << ").\n\n";
  }
  release_section(o, in);
  o << "## Use\n\n```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer, pipeline\n"
       "model = AutoModelForCausalLM.from_pretrained(\"PATH\")\ntokenizer = AutoTokenizer.from_pretrained(\"PATH\")\n"
       "print(pipeline(\"text-generation\", model=model, tokenizer=tokenizer)(\"Hello\", max_new_tokens=20))\n```\n\n";
  o << "## Limits\n\n";
  o << "- Context: " << model.seq_len << " tokens (prompt and generated together); generation_config.json sets "
       "max_length to it. A longer sequence is outside what the model was trained on (its position table has "
    << model.seq_len << " rows).\n";
  o << "- Generation stops at the document separator (`eos_token_id`), the token between documents in training.\n";
  return o.str();
}

}  // namespace shardtrain
