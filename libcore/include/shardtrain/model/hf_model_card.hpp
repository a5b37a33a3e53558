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
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/ckpt/format.hpp"

namespace shardtrain {

// What the card says of a release decision: the decision layer (above this one) reads the record
// (decision/record.hpp, ReleaseRecord) and fills this in, so the record's format is parsed in one
// place. Values are the card's text already ("-" for none); paths are kept whole here and cut to
// their last component by the card.
struct ModelCardRelease {
  bool promote = false;
  std::string decided;      // RFC 3339
  std::string record_path;  // relative to the registry
  std::vector<std::string> reasons;
  struct Holdout {
    std::string selection_snapshot_id, cutoff;
    std::uint64_t sequences = 0;
    double tokens = 0, loss = 0, lower = 0, upper = 0, perplexity = 0;  // nats/token
  };
  std::optional<Holdout> holdout;
  struct Check {
    std::string name, value, limit;  // value and limit as text ("-": none)
    bool passed = false;
  };
  std::vector<Check> checks;  // the applicable ones
};

struct ModelCardInputs {
  const ckpt::CheckpointManifest* manifest = nullptr;
  std::string checkpoint_name;            // the folder's (or file's) last path component
  std::string manifest_sha256;            // "" when the source has none (a consolidated file)
  std::string tokenizer;                  // e.g. "bytes (vocab 256, separator 0 as <|endoftext|>)"
  std::string dtype;                      // "float32" or "bfloat16"
  std::optional<ModelCardRelease> release;  // the newest release record of the checkpoint, if any
  std::string registry_note;              // why there is no record ("no --registry given", ...)
};

std::string hf_model_card(const ModelCardInputs& in);

}  // namespace shardtrain
