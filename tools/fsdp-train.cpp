// fsdp-train: train the decoder with ZeRO-1/2/3 (FSDP) sharding over MPI ranks. Options + one call.
#include "shardtrain/tool/tool.hpp"
#include "shardtrain/tool/train_cli.hpp"
#include "shardtrain/train/trainer.hpp"

int main(int argc, char** argv) {
  shardtrain::TrainOptions o;
  shardtrain::TrainingCli cli;
  o.parallelism.zero_stage = 3;
  o.tool = "fsdp-train";
  CLI::App app{"Train the GPT-style decoder with its state sharded over the data-parallel ranks (ZeRO-1: optimizer "
               "moments; ZeRO-2: + gradients; ZeRO-3/FSDP: + parameters); same options, logs, summary and "
               "checkpoints as ddp-train. See fsdp-train(1)."};
  app.name("fsdp-train");
  shardtrain::add_version_flag(app);
  shardtrain::add_training_options(app, o, cli);
  app.add_option("--zero-stage", o.parallelism.zero_stage, "ZeRO stage: 1 (moments), 2 (+ gradients) or 3 (+ parameters, FSDP)")
      ->check(CLI::Range(1, 3))
      ->capture_default_str();
  app.add_flag("--reshard-after-forward,!--no-reshard-after-forward", o.parallelism.reshard_after_forward,
               "ZeRO-3: free each gathered block after its forward and gather it again for backward (default on)");
  app.add_option("--memory-budget", o.parallelism.memory_budget,
                 "Bytes per rank; a layout that needs more is refused before training, naming a stage or world size "
                 "that fits (0: no budget)")
      ->capture_default_str();
  return shardtrain::run_training_tool(app, o, cli, argc, argv);
}
