#include "shardtrain/model/parameters.hpp"

#include "shardtrain/base/error.hpp"

namespace shardtrain {

ParameterRegistry::ParameterRegistry(const ModelConfig& config) {
  config.validate();
  const std::int64_t V = config.vocab, T = config.seq_len, C = config.d_model;
  wte_ = add("wte.weight", {V, C}, true, InitKind::kNormal);
  wpe_ = add("wpe.weight", {T, C}, true, InitKind::kNormal);
  units_.push_back({"embeddings", 0, total_});
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    BlockOffsets b{};
    b.ln1_w = add(p + "ln_1.weight", {C}, false, InitKind::kOnes);
    b.ln1_b = add(p + "ln_1.bias", {C}, false, InitKind::kZeros);
    b.qkv_w = add(p + "attn.qkv.weight", {3 * C, C}, true, InitKind::kNormal);
    b.qkv_b = add(p + "attn.qkv.bias", {3 * C}, false, InitKind::kZeros);
    b.proj_w = add(p + "attn.proj.weight", {C, C}, true, InitKind::kNormalResidual);
    b.proj_b = add(p + "attn.proj.bias", {C}, false, InitKind::kZeros);
    b.ln2_w = add(p + "ln_2.weight", {C}, false, InitKind::kOnes);
    b.ln2_b = add(p + "ln_2.bias", {C}, false, InitKind::kZeros);
    b.fc_w = add(p + "mlp.fc.weight", {4 * C, C}, true, InitKind::kNormal);
    b.fc_b = add(p + "mlp.fc.bias", {4 * C}, false, InitKind::kZeros);
    b.fc2_w = add(p + "mlp.proj.weight", {C, 4 * C}, true, InitKind::kNormalResidual);
    b.fc2_b = add(p + "mlp.proj.bias", {C}, false, InitKind::kZeros);
    blocks_.push_back(b);
    units_.push_back({"h." + std::to_string(l), b.ln1_w, total_});
  }
  lnf_w_ = add("ln_f.weight", {C}, false, InitKind::kOnes);
  lnf_b_ = add("ln_f.bias", {C}, false, InitKind::kZeros);
  units_.push_back({"ln_f", lnf_w_, total_});
}

std::size_t ParameterRegistry::add(const std::string& name, std::vector<std::int64_t> shape, bool decay,
                                   InitKind init) {
  ParameterInfo info;
  info.name = name;
  info.numel = 1;
  for (auto d : shape) info.numel *= static_cast<std::size_t>(d);
  info.shape = std::move(shape);
  info.offset = total_;
  info.weight_decay = decay;
  info.init = init;
  total_ += info.numel;
  tensors_.push_back(std::move(info));
  return tensors_.back().offset;
}

const ParameterInfo* ParameterRegistry::try_find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const ParameterInfo& ParameterRegistry::find(const std::string& name) const {
  if (const auto* t = try_find(name)) return *t;
  throw UsageError("no parameter named '" + name + "' in this model");
}

}  // namespace shardtrain
