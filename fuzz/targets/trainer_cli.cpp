// Fuzz target: the trainers' command line (ddp-train and fsdp-train share it: tool/train_cli.hpp).
// The input: byte 0 picks the world size (1..8), the rest is the arguments, one per line. Every
// numeric option at and past its limits must end in CLI11's parse error or a UsageError (both exit
// 2 through run_tool), never a crash, an overflow or another exception: the options are parsed,
// finished, checked (validate_training_options) and planned on that world (plan_training_layout,
// with the dataset's vocabulary taken as 256), which is everything run_training does with them
// before it opens the dataset.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "fuzz_target.hpp"
#include "shardtrain/tool/train_cli.hpp"
#include "shardtrain/train/trainer.hpp"

SHARDTRAIN_FUZZ_TARGET(trainer_cli) {
  using namespace shardtrain;
  if (size == 0) return;
  const int world = 1 + data[0] % 8;
  std::vector<std::string> args{"ddp-train"};
  std::string current;
  for (char c : fuzz::as_text(data + 1, size - 1)) {
    if (c == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.size() > 64) return;  // a command line, not a file
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());

  CLI::App app{"trainer options (fuzz)"};
  TrainOptions options;
  TrainingCli cli;
  add_training_options(app, options, cli);
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return;  // run_tool: exit 2 with CLI11's line naming the option
  }
  fuzz::expect_reader_contract("", [&] {
    finish_training_options(options, cli);
    validate_training_options(options);
    ModelConfig model = options.model;
    if (model.vocab == 0) model.vocab = 256;
    model.validate();
    (void)plan_training_layout(options, model, world).value();
  });
}
