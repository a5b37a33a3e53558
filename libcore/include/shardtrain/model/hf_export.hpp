// Export of the model weights in Hugging Face's GPT-2 naming and layout (safetensors + config.json),
// so PyTorch users load a trained model with transformers' GPT2LMHeadModel.from_pretrained(dir) or
// with safetensors.torch.load_file into their own GPT-2 module.
//
// Names (ours -> Hugging Face), per layer l:
//   wte.weight (V,C)              -> transformer.wte.weight (V,C)
//   wpe.weight (T,C)              -> transformer.wpe.weight (T,C)
//   h.l.ln_1.{weight,bias}        -> transformer.h.l.ln_1.{weight,bias}
//   h.l.attn.qkv.weight (3C,C)    -> transformer.h.l.attn.c_attn.weight (C,3C)   transposed
//   h.l.attn.qkv.bias (3C)        -> transformer.h.l.attn.c_attn.bias
//   h.l.attn.proj.weight (C,C)    -> transformer.h.l.attn.c_proj.weight (C,C)    transposed
//   h.l.attn.proj.bias            -> transformer.h.l.attn.c_proj.bias
//   h.l.ln_2.{weight,bias}        -> transformer.h.l.ln_2.{weight,bias}
//   h.l.mlp.fc.weight (4C,C)      -> transformer.h.l.mlp.c_fc.weight (C,4C)      transposed
//   h.l.mlp.fc.bias               -> transformer.h.l.mlp.c_fc.bias
//   h.l.mlp.proj.weight (C,4C)    -> transformer.h.l.mlp.c_proj.weight (4C,C)    transposed
//   h.l.mlp.proj.bias             -> transformer.h.l.mlp.c_proj.bias
//   ln_f.{weight,bias}            -> transformer.ln_f.{weight,bias}
// "Transposed": GPT-2's Conv1D stores (in, out) where our Linear stores (out, in). The q|k|v thirds
// of c_attn and the head order inside each third are the same in both. The LM head is tied to wte
// (tie_word_embeddings): no lm_head.weight is stored, as transformers' own save_pretrained does.
// config.json: model_type gpt2, n_embd, n_layer, n_head, n_positions (= n_ctx = seq_len),
// vocab_size, activation_function "gelu_new" (the tanh GELU our decoder uses), layer_norm_epsilon
// 1e-5, dropouts 0, tie_word_embeddings true, torch_dtype.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/ckpt/read.hpp"
#include "shardtrain/model/config.hpp"

namespace shardtrain {

enum class ExportDType { kFloat32, kBFloat16 };

struct HfTensorName {
  std::string ours;        // registry name
  std::string hf;          // Hugging Face GPT-2 name
  bool transpose = false;  // Conv1D layout: stored transposed
};

// Every parameter of `config`'s model, in registry order, with its GPT-2 name.
std::vector<HfTensorName> hf_gpt2_names(const ModelConfig& config);

// The GPT-2 config.json of `config` (fields above).
nlohmann::json hf_gpt2_config(const ModelConfig& config, ExportDType dtype);

struct ExportResult {
  std::string safetensors_path, config_path;
  std::int64_t tensors = 0, bytes = 0;
};

// Reads the parameters (not the moments) of `source` whole (sum64 checked: IoError naming the
// tensor otherwise), converts (transpose, bf16 round-to-nearest-even when asked) and writes
// `path` and config.json beside it, both atomically. `path` or that config.json existing:
// UsageError (nothing is overwritten).
ExportResult export_hf_gpt2(const ckpt::TensorSource& source, const std::string& path, ExportDType dtype);

}  // namespace shardtrain
