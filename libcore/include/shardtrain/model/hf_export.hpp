// Export of a checkpoint as a Hugging Face model folder in GPT-2's naming and layout, so PyTorch
// users load a trained model with transformers' AutoModelForCausalLM / AutoTokenizer /
// pipeline("text-generation") from the folder as it is, or with safetensors.torch.load_file into
// their own GPT-2 module. The folder holds:
//   model.safetensors        the weights (names below; metadata: format pt, producer, source = the
//                            checkpoint folder's NAME (no local path), step, data snapshot, code version)
//   config.json              GPT-2 config (below), bos/eos/pad_token_id = the dataset's separator
//   generation_config.json   bos/eos/pad = the separator, max_length = the context (seq_len)
//   tokenizer.json, tokenizer_config.json, special_tokens_map.json   for the bytes tokenizer
//                            (hf_tokenizer.hpp); another tokenizer is named in the card, no files
//   README.md                the model card (hf_model_card.hpp)
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
// 1e-5, dropouts 0, tie_word_embeddings true, torch_dtype, bos/eos/pad_token_id.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/ckpt/read.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/hf_model_card.hpp"
#include <optional>

namespace shardtrain {

enum class ExportDType { kFloat32, kBFloat16 };

struct HfTensorName {
  std::string ours;        // registry name
  std::string hf;          // Hugging Face GPT-2 name
  bool transpose = false;  // Conv1D layout: stored transposed
};

// Every parameter of `config`'s model, in registry order, with its GPT-2 name.
std::vector<HfTensorName> hf_gpt2_names(const ModelConfig& config);

// config.json's names of the shape's fields: written by hf_gpt2_config, read by model_config_from_hf
// (hf_import.hpp), compared by require_hf_shape.
inline constexpr std::pair<const char*, int ModelConfig::*> kHfShapeFields[] = {{"vocab_size", &ModelConfig::vocab},
                                                                           {"n_positions", &ModelConfig::seq_len},
                                                                           {"n_embd", &ModelConfig::d_model},
                                                                           {"n_layer", &ModelConfig::n_layer},
                                                                           {"n_head", &ModelConfig::n_head}};

// The GPT-2 config.json of `config` (fields above); bos/eos/pad_token_id = `separator` when >= 0.
nlohmann::json hf_gpt2_config(const ModelConfig& config, ExportDType dtype, std::int64_t separator = -1);

// What the dataset the checkpoint trained on tokenised with (manifest extra "tokenizer", or the
// dataset file named with --data).
struct HfTokenizerInfo {
  std::string name = "bytes";
  std::int64_t vocab = 256;
  std::int64_t separator = 0;
  bool operator==(const HfTokenizerInfo&) const = default;
  static auto fields() {  // the manifest's extra "tokenizer"
    using namespace json_fields;
    using H = HfTokenizerInfo;
    return std::tuple{key("name", &H::name), key("vocab", &H::vocab), key("separator", &H::separator)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  // From a manifest's extra "tokenizer" (an opaque object inside the manifest, hence JSON here);
  // UsageError naming `where` and the field by its pointer when one is missing or mistyped.
  static HfTokenizerInfo from_json(const nlohmann::json& j, const std::string& where);
};

struct HfExportOptions {
  ExportDType dtype = ExportDType::kFloat32;
  HfTokenizerInfo tokenizer;
  std::string manifest_sha256;            // for the card ("" when unknown)
  std::optional<ModelCardRelease> release;  // the checkpoint's release decision, for the card
  std::string registry_note = "no --registry given";
};

struct ExportResult {
  std::string folder;              // where the files are
  std::vector<std::string> files;  // their names, written
  bool tokenizer_files = false;    // false: the tokenizer is not one this version writes files for
  std::int64_t tensors = 0, bytes = 0;
};

// Reads the parameters (not the moments) of `source` whole (sum64 checked: IoError naming the
// tensor otherwise), converts (transpose, bf16 round-to-nearest-even when asked) and writes the
// folder. `out` is the folder to create (it must not exist; its parent must), or, the older form,
// a path ending in ".safetensors": the files then go beside it in its existing folder, the weights
// under that name (none of them may exist). Every file is first written into a temporary sibling
// folder, fsynced, and only then moved into place, so a refused or failed export leaves nothing:
// UsageError for an existing target or a missing parent, IoError for a corrupt source.
ExportResult export_hf_gpt2(const ckpt::TensorSource& source, const std::string& out, const HfExportOptions& options);

}  // namespace shardtrain
