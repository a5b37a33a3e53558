// --model NAME on every tool that takes a shape (ddp-train, fsdp-train): one reading of the command
// line over model/config.hpp's table and rule (kModelPresets, kModelShapeOptions,
// apply_model_preset), so the tools cannot drift apart. Header-only: the tools' targets
// (tool_train, tool_scale_bench, ...) each include it.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "shardtrain/model/config.hpp"

namespace shardtrain {

// Whether `app` has `option` and its command line gave it.
inline bool option_given(const CLI::App& app, const char* option) {
  const CLI::Option* o = app.get_option_no_throw(std::string(option));
  return o != nullptr && o->count() > 0;
}

// --model NAME: the preset's value in every field of `model` whose shape option `app` lacks or its
// command line did not give (explicit options override the preset). Nothing when `name` is empty;
// UsageError naming --model, the known names and then `otherwise` for an unknown name.
inline void apply_model_option(const CLI::App& app, const std::string& name, ModelConfig& model,
                               const std::string& otherwise) {
  if (name.empty()) return;
  apply_model_preset(model_preset(name, "--model", otherwise), model,
                     [&](const char* option) { return option_given(app, option); });
}

}  // namespace shardtrain
