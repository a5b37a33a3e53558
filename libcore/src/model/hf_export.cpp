#include "shardtrain/model/hf_export.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/bf16.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/ckpt/safetensors.hpp"
#include "shardtrain/model/hf_model_card.hpp"
#include "shardtrain/model/hf_tokenizer.hpp"
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

nlohmann::json hf_gpt2_config(const ModelConfig& c, ExportDType dtype, std::int64_t separator) {
  nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}},
                      {"model_type", "gpt2"},
                      {"n_ctx", c.seq_len},
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
  for (const auto& [key, field] : kHfShapeFields) j[key] = c.*field;
  if (separator >= 0) j["bos_token_id"] = j["eos_token_id"] = j["pad_token_id"] = separator;
  return j;
}

HfTokenizerInfo HfTokenizerInfo::from_json(const nlohmann::json& j, const std::string& where) {
  return json_fields::read<HfTokenizerInfo>(JsonFile::parse(j.dump(), where, "tokenizer"), "");
}

namespace {

// The GPT-2 tensors of `source`, converted to `dtype`, in hf_gpt2_names order.
std::vector<ckpt::SafetensorsTensor> gpt2_tensors(const ckpt::TensorSource& source, const ModelConfig& config,
                                                  ExportDType dtype) {
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
  return tensors;
}

std::string last_component(const std::string& path) {
  const fs::path p(path);
  return p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
}

// A temporary folder beside the target, removed unless released (moved into place).
struct StagingFolder {
  fs::path path;
  explicit StagingFolder(const fs::path& target) {
    path = target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()));
    std::error_code ec;
    fs::remove_all(path, ec);
    if (!fs::create_directory(path, ec)) throw IoError(path.string() + ": cannot create the export's temporary folder: " + ec.message());
  }
  ~StagingFolder() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

ExportResult export_hf_gpt2(const ckpt::TensorSource& source, const std::string& out, const HfExportOptions& options) {
  // Where the files go: a new folder, or (the older form) beside a .safetensors path.
  const bool file_form = fs::path(out).extension() == ".safetensors";
  fs::path target = fs::path(out).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path folder = file_form ? target.parent_path() : target;
  const std::string weights_name = file_form ? target.filename().string() : "model.safetensors";
  const fs::path parent = file_form ? folder : (target.parent_path().empty() ? fs::path(".") : target.parent_path());
  std::error_code ec;
  if (!fs::is_directory(parent.empty() ? fs::path(".") : parent, ec))
    throw UsageError(parent.string() + ": no such folder for --out; create it first");
  const ModelConfig config = ModelConfig::from_json(source.manifest().model);
  const HfTokenizerInfo& tok = options.tokenizer;
  const bool bytes = tok.name == "bytes" && tok.vocab == 256;
  if (tok.vocab > config.vocab)
    throw UsageError(source.path() + ": the tokenizer's vocabulary " + std::to_string(tok.vocab) +
                     " exceeds the model's " + std::to_string(config.vocab) + "; the tokenizer information is wrong");
  std::map<std::string, std::string> files;  // name -> content
  files["config.json"] = hf_gpt2_config(config, options.dtype, tok.separator).dump(2) + "\n";
  files["generation_config.json"] =
      nlohmann::json{{"bos_token_id", tok.separator}, {"eos_token_id", tok.separator}, {"pad_token_id", tok.separator},
                     {"max_length", config.seq_len}}
          .dump(2) +
      "\n";
  if (bytes)
    for (const auto& [name, json] : hf_byte_tokenizer_files(int(tok.separator), config.seq_len))
      files[name] = json.dump(2, ' ', false) + "\n";
  ModelCardInputs card;
  card.manifest = &source.manifest();
  card.checkpoint_name = last_component(source.path());
  card.manifest_sha256 = options.manifest_sha256;
  card.tokenizer = tok.name + " (vocab " + std::to_string(tok.vocab) + ", separator " + std::to_string(tok.separator) +
                   (bytes ? " as " + std::string(kHfSeparatorToken) + "; tokenizer files included)"
                          : "; this export writes no tokenizer files for it: add that tokenizer's own files)");
  card.dtype = options.dtype == ExportDType::kFloat32 ? "float32" : "bfloat16";
  card.release = options.release;
  card.registry_note = options.registry_note;
  files["README.md"] = hf_model_card(card);
  std::vector<std::string> names = {weights_name};
  for (const auto& [name, content] : files) names.push_back(name);
  if (file_form) {
    for (const auto& name : names)
      if (fs::exists(folder / name, ec))
        throw UsageError((folder / name).string() + ": exists; ckpt-reshard never overwrites: remove it or choose "
                         "another --out (a new folder)");
  } else if (fs::exists(target, ec)) {
    throw UsageError(target.string() + ": exists; ckpt-reshard never overwrites: remove it or choose another --out");
  }

  const auto& m = source.manifest();
  const std::vector<ckpt::SafetensorsTensor> tensors = gpt2_tensors(source, config, options.dtype);
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"producer", "shardtrain ckpt-reshard --export hf"},
                                                       {"source", card.checkpoint_name},
                                                       {"step", std::to_string(m.step)},
                                                       {"data_snapshot_id", m.data_snapshot_id},
                                                       {"code_version", m.code_version}};
  StagingFolder staging(file_form ? folder / ("export-" + weights_name) : target);
  ExportResult result;
  result.bytes = ckpt::write_safetensors((staging.path / weights_name).string(), tensors, metadata);
  for (const auto& [name, content] : files) {
    write_file_atomically((staging.path / name).string(), content);
    result.bytes += std::int64_t(content.size());
  }
  fsync_path(staging.path.string());
  if (file_form) {
    for (const auto& name : names) fs::rename(staging.path / name, folder / name);
  } else {
    fs::rename(staging.path, target);
    staging.path.clear();
  }
  fsync_path(parent.string());
  result.folder = folder.string();
  result.files = names;
  result.tokenizer_files = bytes;
  result.tensors = std::int64_t(tensors.size());
  return result;
}

}  // namespace shardtrain
