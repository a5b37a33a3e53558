// What the scaling tests share (test_step_model_*.cpp, test_scaling_plan.cpp,
// test_scale_bench_cli.cpp): fresh folders, scale-bench run in-process and as a process, and
// GPT-2 small's published size.
#pragma once
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "shardtrain/tool/scale_bench.hpp"
#include "shardtrain/tool/tool.hpp"
#include "test_support.hpp"

namespace scaling_test {
namespace fs = std::filesystem;
using namespace shardtrain;

inline fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("shardtrain_scaling_model_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}



// Runs scale-bench's subcommands in-process (the tool's own run_tool): the exit code.
inline int run_scale_bench(std::vector<std::string> args) {
  namespace sb = shardtrain::scale_bench;
  CLI::App app{"scale-bench", "scale-bench"};
  app.require_subcommand(1);
  const std::vector<sb::Subcommand> commands = {sb::add_fit_command(app), sb::add_predict_command(app),
                                                sb::add_plan_command(app)};
  args.insert(args.begin(), "scale-bench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return run_tool(app, int(argv.size()), argv.data(), {}, [&] {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
    return 99;
  });
}

// GPT-2 small as published (the Hugging Face gpt2 config: n_layer 12, n_embd 768, n_head 12,
// n_positions 1024, vocab_size 50257, the LM head tied): 124,439,808 parameters, and its training
// FLOPs per token by 6N + 12 L T C (docs/ARCHITECTURE.md), worked here from those numbers.
inline constexpr double kGpt2SmallParams = 124439808;
inline constexpr double kGpt2SmallFlopsPerToken = 6 * kGpt2SmallParams + 12.0 * 12 * 1024 * 768;

// scale-bench run as a process (its stdout, its one error line and exit code are the interface).
inline test::ToolRun scale_bench_process(const std::vector<std::string>& args) { return test::run_built_tool("scale-bench", args); }

inline std::size_t lines_of(const std::string& text) { return std::size_t(std::count(text.begin(), text.end(), '\n')); }

}  // namespace scaling_test
