#include "shardtrain/model/hf_export.hpp"

#include <cstring>
#include <filesystem>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/bf16.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/ckpt/safetensors.hpp"
#include "shardtrain/model/parameters.hpp"

namespace fs = std::filesystem;

namespace shardtrain {

std::vector<HfTensorName> hf_gpt2_names(const ModelConfig& config) {
  // Our block-local suffix -> (GPT-2 suffix, Conv1D-transposed).
  static const std::pair<const char*, std::pair<const char*, bool>> kBlock[] = {
      {"ln_1.weight", {"ln_1.weight", false}},          {"ln_1.bias", {"ln_1.bias", false}},
      {"attn.qkv.weight", {"attn.c_attn.weight", true}}, {"attn.qkv.bias", {"attn.c_attn.bias", false}},
      {"attn.proj.weight", {"attn.c_proj.weight", true}}, {"attn.proj.bias", {"attn.c_proj.bias", false}},
      {"ln_2.weight", {"ln_2.weight", false}},          {"ln_2.bias", {"ln_2.bias", false}},
      {"mlp.fc.weight", {"mlp.c_fc.weight", true}},     {"mlp.fc.bias", {"mlp.c_fc.bias", false}},
      {"mlp.proj.weight", {"mlp.c_proj.weight", true}}, {"mlp.proj.bias", {"mlp.c_proj.bias", false}},
  };
  std::vector<HfTensorName> out;
  const ParameterRegistry registry(config);
  for (const auto& t : registry.tensors()) {
    HfTensorName n{t.name, "transformer." + t.name, false};
    if (t.name.rfind("h.", 0) == 0) {
      const std::size_t dot = t.name.find('.', 2);
      const std::string suffix = t.name.substr(dot + 1);
      bool found = false;
      for (const auto& [ours, hf] : kBlock)
        if (suffix == ours) {
          n.hf = "transformer." + t.name.substr(0, dot + 1) + hf.first;
          n.transpose = hf.second;
          found = true;
        }
      if (!found) throw Error(ExitCode::kInternal, "hf_gpt2_names: no GPT-2 name for parameter '" + t.name + "'");
    }
    out.push_back(n);
  }
  return out;
}

nlohmann::json hf_gpt2_config(const ModelConfig& c, ExportDType dtype) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab},
          {"n_positions", c.seq_len},
          {"n_ctx", c.seq_len},
          {"n_embd", c.d_model},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_inner", nullptr},  // 4 * n_embd, as ours
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},  // backend.hpp: layer norm eps = 1e-5
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", true},
          {"use_cache", true},
          {"torch_dtype", dtype == ExportDType::kFloat32 ? "float32" : "bfloat16"}};
}

ExportResult export_hf_gpt2(const ckpt::TensorSource& source, const std::string& path, ExportDType dtype) {
  ExportResult result;
  result.safetensors_path = path;
  const fs::path parent = fs::path(path).parent_path();
  result.config_path = (parent / "config.json").string();
  std::error_code ec;
  for (const auto& p : {result.safetensors_path, result.config_path})
    if (fs::exists(p, ec))
      throw UsageError(p + ": exists; ckpt-reshard never overwrites: remove it or choose another --out");
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw UsageError(parent.string() + ": no such folder for --out; create it first");
  const ModelConfig config = ModelConfig::from_json(source.manifest().model);
  const ParameterRegistry registry(config);
  std::vector<ckpt::SafetensorsTensor> tensors;
  std::vector<float> values, transposed;
  for (const auto& name : hf_gpt2_names(config)) {
    const ParameterInfo& p = registry.find(name.ours);
    const ckpt::TensorInfo& info = source.at(name.ours);
    if (info.spec.shape != p.shape || info.spec.dtype != DType::kFloat32)
      throw UsageError(source.path() + ": tensor '" + name.ours + "' has another shape or type than the model config "
                       "in its manifest says; the checkpoint is inconsistent");
    values.resize(p.numel);
    source.read_range(name.ours, 0, std::int64_t(p.numel), values.data());
    const std::uint64_t got = ckpt::piece_checksum(values.data(), std::int64_t(p.numel), DType::kFloat32, 0);
    if (got != info.checksum)
      throw IoError(source.path() + ": tensor '" + name.ours + "' fails its checksum (" + ckpt::format_checksum(got) +
                    " vs " + ckpt::format_checksum(info.checksum) + "): corrupt data; use another checkpoint");
    std::vector<std::int64_t> shape = p.shape;
    const float* src = values.data();
    if (name.transpose) {  // (out, in) -> (in, out)
      const std::size_t rows = std::size_t(shape[0]), cols = std::size_t(shape[1]);
      transposed.resize(p.numel);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) transposed[c * rows + r] = values[r * cols + c];
      std::swap(shape[0], shape[1]);
      src = transposed.data();
    }
    ckpt::SafetensorsTensor t;
    t.name = name.hf;
    t.shape = shape;
    if (dtype == ExportDType::kFloat32) {
      t.dtype = "F32";
      t.data.resize(p.numel * 4);
      std::memcpy(t.data.data(), src, p.numel * 4);
    } else {
      t.dtype = "BF16";
      t.data.resize(p.numel * 2);
      for (std::size_t i = 0; i < p.numel; ++i) {
        const std::uint16_t b = float_to_bf16_bits(src[i]);
        std::memcpy(t.data.data() + 2 * i, &b, 2);
      }
    }
    tensors.push_back(std::move(t));
  }
  const auto& m = source.manifest();
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"producer", "shardtrain ckpt-reshard --export safetensors"},
      {"source", source.path()},
      {"step", std::to_string(m.step)},
      {"data_snapshot_id", m.data_snapshot_id},
      {"code_version", m.code_version}};
  result.bytes = ckpt::write_safetensors(path, tensors, metadata);
  result.tensors = std::int64_t(tensors.size());
  write_json_file(result.config_path, hf_gpt2_config(config, dtype));
  return result;
}

}  // namespace shardtrain
