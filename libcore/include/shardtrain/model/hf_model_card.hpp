// The README.md model card of a Hugging Face export folder, generated from the checkpoint's
// identity only (its manifest, and the release record of it when a registry has one), so the card
// says what the weights are without anyone writing it by hand:
//   YAML front matter (library_name transformers, pipeline_tag text-generation, tags);
//   the checkpoint: folder name, step, tokens seen, manifest SHA-256, code version;
//   training data: data selection snapshot id and cutoff, dataset snapshot id, tokenizer;
//   model: vocabulary, context, width, layers, heads, parameters;
//   training configuration: batch (global, micro, accumulation), optimizer, seed, determinism;
//   layout: world size, DP x TP, ZeRO stage, rank files;
//   evaluation and release: the record's decision, hold-out loss / perplexity / interval, every
//   check with value and limit, or a line saying no record was found;
//   how to load it, and its limits (context length, what generation stops at).
// No local path appears: folders are named by their last component only.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/ckpt/format.hpp"

namespace shardtrain {

struct ModelCardInputs {
  const ckpt::CheckpointManifest* manifest = nullptr;
  std::string checkpoint_name;            // the folder's (or file's) last path component
  std::string manifest_sha256;            // "" when the source has none (a consolidated file)
  std::string tokenizer;                  // e.g. "bytes (vocab 256, separator 0 as <|endoftext|>)"
  std::string dtype;                      // "float32" or "bfloat16"
  std::optional<nlohmann::json> release;  // a release record (docs/FORMATS.md "Release record")
  std::string registry_note;              // why there is no record ("no --registry given", ...)
};

std::string hf_model_card(const ModelCardInputs& in);

}  // namespace shardtrain
