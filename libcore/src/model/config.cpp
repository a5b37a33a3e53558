#include "shardtrain/model/config.hpp"

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"

namespace shardtrain {
namespace {
void require_range(const char* field, int value, int lo, int hi) {
  if (value < lo || value > hi)
    throw UsageError(std::string("model config: ") + field + " = " + std::to_string(value) +
                     " is out of range; it must be in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
}
}  // namespace

void ModelConfig::validate() const {
  require_range("vocab", vocab, 2, 1 << 24);
  require_range("seq_len", seq_len, 1, 1 << 16);
  require_range("d_model", d_model, 1, 1 << 16);
  require_range("n_layer", n_layer, 1, 1024);
  require_range("n_head", n_head, 1, d_model);
  if (d_model % n_head != 0)
    throw UsageError("model config: n_head = " + std::to_string(n_head) + " does not divide d_model = " +
                     std::to_string(d_model) + "; choose n_head so that d_model / n_head is a whole head size");
}

std::int64_t ModelConfig::parameter_count() const {
  const std::int64_t C = d_model;
  const std::int64_t per_layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) +
                                 (4 * C * C + C);
  return std::int64_t(vocab) * C + std::int64_t(seq_len) * C + n_layer * per_layer + 2 * C;
}

double ModelConfig::flops_per_token() const {
  return 6.0 * double(parameter_count()) + 12.0 * n_layer * double(seq_len) * d_model;
}

ModelConfig model_preset(const std::string& name, const char* option, const std::string& otherwise) {
  for (const auto& [preset, config] : kModelPresets)
    if (name == preset) return config;
  throw UsageError(std::string(option) + ": '" + name + "' is not a known model; choose one of " + model_preset_names() +
                   (otherwise.empty() ? "" : ", " + otherwise));
}

void apply_model_preset(const ModelConfig& preset, ModelConfig& model, const std::function<bool(const char* option)>& given) {
  for (const auto& [option, field] : kModelShapeOptions)
    if (!given(option)) model.*field = preset.*field;
}

std::string model_preset_names() {
  std::string names;
  for (const auto& preset : kModelPresets) names += (names.empty() ? "" : ", ") + std::string(preset.first);
  return names;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j, const std::string& where) {
  ModelConfig c = json_fields::read<ModelConfig>(JsonFile::parse(j.dump(), where, "the model config"), "");
  c.validate();
  return c;
}

std::string ModelConfig::hash() const { return hex64(fnv1a64(to_json().dump())); }

}  // namespace shardtrain
