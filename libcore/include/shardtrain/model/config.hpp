// Model configuration of the GPT-2 style decoder, validated at construction.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

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

  nlohmann::json to_json() const;
  // Reads the five fields (all required); throws UsageError naming a missing or mistyped field.
  static ModelConfig from_json(const nlohmann::json& j);
  // A short stable hash of the config (hex), for logs and checkpoint identity.
  std::string hash() const;
  bool operator==(const ModelConfig&) const = default;
};

}  // namespace shardtrain
