#include "shardtrain/model/parameters.hpp"

#include <algorithm>

#include "shardtrain/base/error.hpp"

namespace shardtrain {

void validate_tensor_parallel(const ModelConfig& config, int tp, int world_size) {
  if (tp < 1) throw UsageError("--tp must be at least 1 (got " + std::to_string(tp) + ")");
  if (tp == 1) return;
  if (config.n_head % tp != 0)
    throw UsageError("--tp " + std::to_string(tp) + " does not divide the model's " + std::to_string(config.n_head) +
                     " attention heads; choose a --tp that divides n_head");
  if ((4 * config.d_model) % tp != 0)
    throw UsageError("--tp " + std::to_string(tp) + " does not divide the MLP width 4 x d_model = " +
                     std::to_string(4 * config.d_model) + "; choose a --tp that divides it");
  if (world_size > 0 && world_size % tp != 0)
    throw UsageError("--tp " + std::to_string(tp) + " does not divide the world of " + std::to_string(world_size) +
                     " ranks; launch a multiple of " + std::to_string(tp) + " ranks (W = DP x TP)");
}

std::int64_t padded_vocab(const ModelConfig& config, int tp) {
  return (std::int64_t(config.vocab) + tp - 1) / tp * tp;
}

std::size_t ParameterInfo::logical_numel() const {
  std::size_t n = 1;
  for (auto d : logical_shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::vector<LogicalRun> logical_runs(const ParameterInfo& info, const TensorParallelPlace& place) {
  if (info.split == TpSplit::kReplicated || !place.split()) return {{0, 0, info.numel}};
  const std::size_t r = std::size_t(place.rank);
  const std::size_t rows = std::size_t(info.shape[0]);
  const std::size_t width = info.shape.size() > 1 ? std::size_t(info.shape[1]) : 1;  // local row width
  switch (info.split) {
    case TpSplit::kRows:
      return {{0, r * info.numel, info.numel}};
    case TpSplit::kQkvRows: {  // rows = 3 * (C/T): q, k, v bands of this rank's heads
      const std::size_t band = rows / 3, logical_third = std::size_t(info.logical_shape[0]) / 3;
      std::vector<LogicalRun> runs;
      for (std::size_t part = 0; part < 3; ++part)
        runs.push_back({part * band * width, (part * logical_third + r * band) * width, band * width});
      return runs;
    }
    case TpSplit::kColumns: {
      const std::size_t logical_width = std::size_t(info.logical_shape[1]);
      std::vector<LogicalRun> runs(rows);
      for (std::size_t i = 0; i < rows; ++i) runs[i] = {i * width, i * logical_width + r * width, width};
      return runs;
    }
    case TpSplit::kVocabRows: {
      const std::size_t first = r * rows, vocab = std::size_t(info.logical_shape[0]);
      const std::size_t valid = first >= vocab ? 0 : std::min(rows, vocab - first);
      if (valid == 0) return {};
      return {{0, first * width, valid * width}};
    }
    case TpSplit::kReplicated:
      break;
  }
  return {{0, 0, info.numel}};
}

ParameterRegistry::ParameterRegistry(const ModelConfig& config, TensorParallelPlace place) : place_(place) {
  config.validate();
  validate_tensor_parallel(config, place.size);
  const std::int64_t V = config.vocab, T = config.seq_len, C = config.d_model;
  padded_vocab_ = padded_vocab(config, place.size);
  wte_ = add("wte.weight", {V, C}, true, InitKind::kNormal, TpSplit::kVocabRows);
  wpe_ = add("wpe.weight", {T, C}, true, InitKind::kNormal);
  units_.push_back({"embeddings", 0, total_});
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    BlockOffsets b{};
    b.ln1_w = add(p + "ln_1.weight", {C}, false, InitKind::kOnes);
    b.ln1_b = add(p + "ln_1.bias", {C}, false, InitKind::kZeros);
    b.qkv_w = add(p + "attn.qkv.weight", {3 * C, C}, true, InitKind::kNormal, TpSplit::kQkvRows);
    b.qkv_b = add(p + "attn.qkv.bias", {3 * C}, false, InitKind::kZeros, TpSplit::kQkvRows);
    b.proj_w = add(p + "attn.proj.weight", {C, C}, true, InitKind::kNormalResidual, TpSplit::kColumns);
    b.proj_b = add(p + "attn.proj.bias", {C}, false, InitKind::kZeros);
    b.ln2_w = add(p + "ln_2.weight", {C}, false, InitKind::kOnes);
    b.ln2_b = add(p + "ln_2.bias", {C}, false, InitKind::kZeros);
    b.fc_w = add(p + "mlp.fc.weight", {4 * C, C}, true, InitKind::kNormal, TpSplit::kRows);
    b.fc_b = add(p + "mlp.fc.bias", {4 * C}, false, InitKind::kZeros, TpSplit::kRows);
    b.fc2_w = add(p + "mlp.proj.weight", {C, 4 * C}, true, InitKind::kNormalResidual, TpSplit::kColumns);
    b.fc2_b = add(p + "mlp.proj.bias", {C}, false, InitKind::kZeros);
    blocks_.push_back(b);
    units_.push_back({"h." + std::to_string(l), b.ln1_w, total_});
  }
  lnf_w_ = add("ln_f.weight", {C}, false, InitKind::kOnes);
  lnf_b_ = add("ln_f.bias", {C}, false, InitKind::kZeros);
  units_.push_back({"ln_f", lnf_w_, total_});
}

// The local shape of a logical tensor on this registry's place (file comment of parameters.hpp).
std::size_t ParameterRegistry::add(const std::string& name, std::vector<std::int64_t> logical_shape, bool decay,
                                   InitKind init, TpSplit split) {
  ParameterInfo info;
  info.name = name;
  info.logical_shape = logical_shape;
  info.split = place_.split() ? split : TpSplit::kReplicated;
  std::vector<std::int64_t> shape = logical_shape;
  const std::int64_t T = place_.size;
  switch (info.split) {
    case TpSplit::kRows:
    case TpSplit::kQkvRows: shape[0] /= T; break;
    case TpSplit::kColumns: shape[1] /= T; break;
    case TpSplit::kVocabRows: shape[0] = padded_vocab_ / T; break;
    case TpSplit::kReplicated: break;
  }
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
