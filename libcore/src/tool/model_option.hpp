// --model NAME on every tool that takes a shape (ddp-train, fsdp-train, scale-bench plan and
// predict): one reading of the command line over model/config.hpp's table and rule (kModelPresets,
// kModelShapeOptions, apply_model_preset), so the tools cannot drift apart; and scale-bench's
// refusal of --model FILE, the step model file's option before issue 46. Header-only: the tools'
// targets (tool_train, tool_scale_bench) each include it.
#pragma once
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "shardtrain/base/error.hpp"
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

// scale-bench's --model named the step model file of `scale-bench fit` until issue 46, which gave
// the file --step-model FILE and --model the trainers' meaning. A value that is no preset name but
// an existing file is an old command line (users have scripts): one line saying so (UsageError,
// exit 2). `command` names the subcommand ("scale-bench plan").
inline void refuse_step_model_file(const std::string& value, const std::string& command) {
  for (const auto& preset : kModelPresets)
    if (value == preset.first) return;
  std::error_code ec;
  if (value.empty() || !std::filesystem::exists(value, ec)) return;
  throw UsageError(command + ": --model names a model shape now (" + model_preset_names() + "); the step model file '" +
                   value + "' of scale-bench fit is given as --step-model FILE: --step-model " + value);
}

// A scale-bench subcommand that takes no shape (run: the trainer does, after --; report: each run's
// summary has it) keeps --model, hidden from --help, so that an old command line gets one line
// saying what to write instead: refuse_model_option, first thing in the subcommand's body, refuses
// a given --model with refuse_step_model_file's line for a file, else with `instead`.
inline void add_refused_model_option(CLI::App* app, std::string& value) { app->add_option("--model", value)->group(""); }
inline void refuse_model_option(const CLI::App& app, const std::string& value, const std::string& command,
                                const std::string& instead) {
  if (!option_given(app, "--model")) return;
  refuse_step_model_file(value, command);
  throw UsageError(command + ": --model " + value + ": " + instead);
}

}  // namespace shardtrain
