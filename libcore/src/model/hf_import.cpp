#include "shardtrain/model/hf_import.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/sha256.hpp"
#include "shardtrain/ckpt/safetensors.hpp"
#include "shardtrain/model/hf_export.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/model/train_state.hpp"

namespace fs = std::filesystem;

namespace shardtrain {

namespace {

[[noreturn]] void refuse(const std::string& where, const std::string& why) {
  throw UsageError(where + ": " + why + "; ckpt-reshard --import hf reads GPT-2 models as shardtrain's decoder "
                   "implements them (see ckpt-reshard(1))");
}

// The training state held in memory: what write_consolidated and the resharder read.
class MemorySource final : public ckpt::TensorSource {
 public:
  MemorySource(std::string path, ckpt::CheckpointManifest manifest) : path_(std::move(path)), manifest_(std::move(manifest)) {}
  void add(const ckpt::TensorSpec& spec, std::vector<float> values) {
    ckpt::TensorInfo info;
    info.spec = spec;
    info.checksum = ckpt::piece_checksum(values.data(), std::int64_t(values.size()), DType::kFloat32, 0);
    tensors_.push_back(info);
    data_[spec.name] = std::move(values);
  }
  void sort() {
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) { return a.spec.name < b.spec.name; });
  }
  const std::string& path() const override { return path_; }
  const ckpt::CheckpointManifest& manifest() const override { return manifest_; }
  const std::vector<ckpt::TensorInfo>& tensors() const override { return tensors_; }
  void read_range(const std::string& name, std::int64_t offset, std::int64_t count, void* out) const override {
    const auto& v = data_.at(name);
    if (offset < 0 || count < 0 || std::size_t(offset + count) > v.size())
      throw UsageError(path_ + ": range outside tensor '" + name + "'");
    std::memcpy(out, v.data() + offset, std::size_t(count) * sizeof(float));
  }

 private:
  std::string path_;
  ckpt::CheckpointManifest manifest_;
  std::vector<ckpt::TensorInfo> tensors_;
  std::map<std::string, std::vector<float>> data_;
};

nlohmann::json file_identity(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return {{"name", p.filename().string()}, {"sha256", to_hex(sha256(bytes.data(), bytes.size()))}, {"bytes", bytes.size()}};
}

}  // namespace

ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) refuse(where, "not a JSON object");
  // nlohmann's value(key, default) throws type_error for a field of another type (the tool's
  // "internal error"): every optional field is checked for its type first, by name.
  for (const char* key : {"model_type", "activation_function"})
    if (j.contains(key) && !j[key].is_string()) refuse(where, std::string("'") + key + "' is not a string");
  for (const char* key : {"tie_word_embeddings", "add_cross_attention", "scale_attn_weights", "scale_attn_by_inverse_layer_idx"})
    if (j.contains(key) && !j[key].is_boolean()) refuse(where, std::string("'") + key + "' is not true or false");
  if (j.value("model_type", std::string()) != "gpt2")
    refuse(where, "model_type '" + j.value("model_type", std::string("(none)")) + "' is not gpt2");
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a != "GPT2LMHeadModel" && a != "GPT2Model")
        refuse(where, "architecture " + a.dump() + " is not GPT2LMHeadModel (a head this decoder does not have)");
  // The shape's numbers by json_fields' rules (an integer, the one rule of every file), then >= 0 and
  // within an int (4294967552 is refused by value, never read as its low 32 bits, 256).
  const JsonFile file = JsonFile::parse(j.dump(), where, "the Hugging Face config");
  ModelConfig c;
  for (const auto& [key, field] : kHfShapeFields) {
    const std::string pointer = json_fields::field("", key);
    json_fields::count(file, pointer);
    c.*field = json_fields::small_integer(file, pointer);
  }
  const std::optional<std::int64_t> n_ctx = json_fields::nullable_integer(file, "/n_ctx");
  if (n_ctx && *n_ctx > c.seq_len)
    refuse(where, "n_ctx " + std::to_string(*n_ctx) + " is a context beyond the model's n_positions " + std::to_string(c.seq_len));
  const std::string act = j.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    refuse(where, "activation_function '" + act + "' is not the tanh GELU (gelu_new) of this decoder");
  const double eps = file.find_number("/layer_norm_epsilon").value_or(1e-5);
  if (std::abs(eps - 1e-5) > 1e-12)
    refuse(where, "layer_norm_epsilon " + j["layer_norm_epsilon"].dump() + " is not the decoder's 1e-5");
  if (j.contains("n_inner") && !j["n_inner"].is_null() && j["n_inner"] != 4 * c.d_model)
    refuse(where, "n_inner " + j["n_inner"].dump() + " is not 4 x n_embd = " + std::to_string(4 * c.d_model));
  if (!j.value("tie_word_embeddings", true)) refuse(where, "tie_word_embeddings false: an untied LM head, which this decoder cannot represent");
  if (j.value("add_cross_attention", false)) refuse(where, "add_cross_attention: an encoder-decoder block");
  if (!j.value("scale_attn_weights", true)) refuse(where, "scale_attn_weights false: unscaled attention");
  if (j.value("scale_attn_by_inverse_layer_idx", false)) refuse(where, "scale_attn_by_inverse_layer_idx: another attention scale");
  try {
    c.validate();
  } catch (const UsageError& e) {
    refuse(where, e.what());
  }
  return c;
}

void require_hf_shape(const ModelConfig& config, const std::string& model_name, const std::string& config_path) {
  const ModelConfig preset = model_preset(model_name);
  std::string differences;
  for (const auto& [name, field] : kHfShapeFields)
    if (config.*field != preset.*field)
      differences += (differences.empty() ? "" : "; ") + std::string(name) + " " + std::to_string(config.*field) +
                     " there, " + std::to_string(preset.*field) + " in " + model_name;
  if (!differences.empty())
    throw UsageError(config_path + " is not the shape of --model " + model_name + ": " + differences +
                     " (import without --model to take the folder's own shape)");
}

std::unique_ptr<ckpt::TensorSource> import_hf_gpt2(const std::string& folder, int data_parallel, const std::string& model_name) {
  const fs::path dir(folder);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError(folder + ": no such folder (a Hugging Face model folder)");
  const fs::path config_path = dir / "config.json", weights_path = dir / "model.safetensors";
  if (!fs::exists(config_path, ec)) throw UsageError(folder + ": no config.json");
  if (!fs::exists(weights_path, ec))
    throw UsageError(folder + ": no model.safetensors" +
                     std::string(fs::exists(dir / "model.safetensors.index.json", ec) ? " (a sharded model: not read by this version)"
                                 : fs::exists(dir / "pytorch_model.bin", ec) ? " (pytorch_model.bin is a pickle: save it with safe_serialization)"
                                                                             : ""));
  const nlohmann::json config_json = JsonFile::read(config_path.string(), "the Hugging Face config").json();
  const ModelConfig config = model_config_from_hf(config_json, config_path.string());
  if (!model_name.empty()) require_hf_shape(config, model_name, config_path.string());
  ckpt::SafetensorsFile file = ckpt::read_safetensors(weights_path.string());
  std::map<std::string, const ckpt::SafetensorsTensor*> by_name;
  for (const auto& t : file.tensors) {
    std::string name = t.name.rfind("transformer.", 0) == 0 ? t.name.substr(12) : t.name;
    if (name.size() > 9 && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))) continue;  // mask buffers
    by_name[name] = &t;
  }
  const ParameterRegistry registry(config);
  ckpt::CheckpointManifest m;
  m.step = 0;
  m.model = config.to_json();
  m.config = {{"model", m.model}, {"imported", "hf-gpt2"}};
  m.layout = {1, 1, 1, 0};
  m.global_batch = std::max(1, data_parallel);
  m.micro_batch = 1;
  m.grad_accum = 1;
  m.rng = {{"seed", 0}, {"init", "imported weights"}};
  m.extra = {{"imported_from",
              {{"format", "hf-gpt2"},
               {"folder", fs::absolute(dir).lexically_normal().filename().string()},
               {"files", {file_identity(config_path), file_identity(weights_path)}},
               {"torch_dtype", config_json.value("torch_dtype", std::string("float32"))}}}};
  auto source = std::make_unique<MemorySource>("hf:" + fs::absolute(dir).lexically_normal().filename().string(), m);
  std::vector<float> wte;
  for (const auto& name : hf_gpt2_names(config)) {
    const std::string hf = name.hf.substr(12);  // without "transformer."
    const auto it = by_name.find(hf);
    if (it == by_name.end()) throw UsageError(weights_path.string() + ": no tensor '" + name.hf + "' (nor '" + hf + "')");
    const ParameterInfo& p = registry.find(name.ours);
    std::vector<std::int64_t> want = p.shape;
    if (name.transpose) std::swap(want[0], want[1]);
    if (it->second->shape != want)
      refuse(weights_path.string(), "tensor '" + it->first + "' has shape " + nlohmann::json(it->second->shape).dump() +
                                        ", config.json implies " + nlohmann::json(want).dump());
    std::vector<float> v = ckpt::safetensors_floats(*it->second);
    if (name.transpose) {  // (in, out) -> (out, in)
      const std::size_t rows = std::size_t(want[0]), cols = std::size_t(want[1]);
      std::vector<float> t(v.size());
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
      v.swap(t);
    }
    if (name.ours == "wte.weight") wte = v;
    source->add({name.ours, p.shape, DType::kFloat32}, std::move(v));
  }
  if (const auto head = by_name.find("lm_head.weight"); head != by_name.end() && head->second->dtype != "")
    if (ckpt::safetensors_floats(*head->second) != wte)
      refuse(weights_path.string(), "lm_head.weight differs from transformer.wte.weight: an untied LM head, which "
                                    "this decoder cannot represent");
  for (const auto& t : registry.tensors())
    for (const char* prefix : {"optim.exp_avg.", "optim.exp_avg_sq."})
      source->add({prefix + t.name, t.shape, DType::kFloat32}, std::vector<float>(t.numel, 0.0f));
  source->sort();
  return source;
}

}  // namespace shardtrain
