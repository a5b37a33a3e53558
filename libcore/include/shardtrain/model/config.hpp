// Model configuration of the GPT-2 style decoder, validated at construction.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>

#include "shardtrain/base/json_record.hpp"

namespace shardtrain {

struct ModelConfig {
  int vocab = 256;    // V: token ids are in [0, vocab)
  int seq_len = 256;  // T: context length (the learned position table has T rows)
  int d_model = 256;  // C: residual width
  int n_layer = 4;    // L: transformer blocks
  int n_head = 4;     // NH: attention heads; d_model must be a multiple of n_head

  // Throws UsageError naming the first bad field and why ("model config: n_head 5 does not
  // divide d_model 96; choose ...").
  void validate() const;

  // Total trainable parameters (the tied LM head is counted once).
  std::int64_t parameter_count() const;
  // Training FLOPs per token, 6N + 12 L T C (ARCHITECTURE.md), N = parameter_count().
  double flops_per_token() const;

  static auto fields() {
    using namespace json_fields;
    using M = ModelConfig;
    return std::tuple{key("vocab", &M::vocab), key("seq_len", &M::seq_len), key("d_model", &M::d_model),
                      key("n_layer", &M::n_layer), key("n_head", &M::n_head)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  // Reads the five fields (all required) and validates them; throws UsageError naming `where` (the
  // file it came from) and a missing or mistyped field by its pointer ("...: the model config has no
  // field /n_head").
  static ModelConfig from_json(const nlohmann::json& j, const std::string& where = "model config");
  // A short stable hash of the config (hex), for logs and checkpoint identity.
  std::string hash() const;
  bool operator==(const ModelConfig&) const = default;
};

// The shapes a user names instead of spelling out (--model NAME): GPT-2's four published sizes
// (Radford et al. 2019, as the Hugging Face configs gpt2, gpt2-medium, gpt2-large and gpt2-xl give
// them): vocabulary 50,257, context 1,024. gpt2-small is this project's standard workload (124M
// parameters with the tied LM head; llm.c's anchor model). One table: --help, the error message
// and the lookup all read it.
inline constexpr std::pair<const char*, ModelConfig> kModelPresets[] = {
    {"gpt2-small", {.vocab = 50257, .seq_len = 1024, .d_model = 768, .n_layer = 12, .n_head = 12}},
    {"gpt2-medium", {.vocab = 50257, .seq_len = 1024, .d_model = 1024, .n_layer = 24, .n_head = 16}},
    {"gpt2-large", {.vocab = 50257, .seq_len = 1024, .d_model = 1280, .n_layer = 36, .n_head = 20}},
    {"gpt2-xl", {.vocab = 50257, .seq_len = 1024, .d_model = 1600, .n_layer = 48, .n_head = 25}}};
// The preset called `name`; throws UsageError naming `option` and the known names otherwise, then
// `otherwise` when given (what else the tool takes: "or give the shape with --vocab, ...").
ModelConfig model_preset(const std::string& name, const char* option = "--model", const std::string& otherwise = "");
// "gpt2-small, gpt2-medium, gpt2-large, gpt2-xl"
std::string model_preset_names();

// The options that set one field of the shape each, by the trainers' names; given beside --model
// NAME, each overrides the preset's value of its field. A tool that takes a shape uses these names
// for those of the fields it has (scale-bench plan: --vocab and --seq-len).
inline constexpr std::pair<const char*, int ModelConfig::*> kModelShapeOptions[] = {
    {"--vocab", &ModelConfig::vocab},
    {"--seq-len", &ModelConfig::seq_len},
    {"--d-model", &ModelConfig::d_model},
    {"--layers", &ModelConfig::n_layer},
    {"--heads", &ModelConfig::n_head}};
// --model NAME under the explicit shape options: `preset`'s value in every field of `model` whose
// option (kModelShapeOptions) `given` says the command line did not give. The one rule of every
// tool that takes --model NAME (the trainers, scale-bench plan and predict).
void apply_model_preset(const ModelConfig& preset, ModelConfig& model, const std::function<bool(const char* option)>& given);

}  // namespace shardtrain
