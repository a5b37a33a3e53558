// ddp-train: train the decoder data-parallel over MPI ranks. Options + one call.
#include "shardtrain/tool/tool.hpp"
#include "shardtrain/tool/train_cli.hpp"
#include "shardtrain/train/trainer.hpp"

int main(int argc, char** argv) {
  shardtrain::TrainOptions o;
  shardtrain::TrainingCli cli;
  CLI::App app{"Train the GPT-style decoder data-parallel (full replicas) on a data-prep dataset; prints a line "
               "per step and writes per-rank JSONL step logs, a summary JSON and checkpoints into --run-dir. "
               "See ddp-train(1)."};
  app.name("ddp-train");
  shardtrain::add_version_flag(app);
  shardtrain::add_training_options(app, o, cli);
  return shardtrain::run_training_tool(app, o, cli, argc, argv);
}
