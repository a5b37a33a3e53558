// kill-resume-proof: prove that SIGKILLs at random steps (and during checkpoint writes, and node
// losses) lose nothing: a deterministic job run straight through and under run-resilient while
// ranks are killed; the final checkpoints must be BITWISE equal. Options + one call into libcore
// (launch/kill_resume_proof.hpp). See kill-resume-proof(1).
#include <filesystem>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/launch/kill_resume_proof.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace launch = shardtrain::launch;
  CLI::App app{"Kill-and-resume proof: a deterministic training job run straight through, then the same job under\n"
               "run-resilient while SIGKILL hits ranks at planned steps (seeded, or --plan), some during a checkpoint\n"
               "write, some as node losses (--shrink). The proof holds when the final checkpoint (parameters and\n"
               "optimizer moments) is BITWISE the uninterrupted run's and every kill did what the plan said.\n"
               "Exit 0 holds, 1 not (progress lost, or a harness inconsistency), 2 usage.",
               "kill-resume-proof"};
  launch::ProofOptions o;
  std::string shrink;
  app.add_option("--np", o.shape.world, "Ranks")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--steps", o.shape.steps, "Training steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--kills", o.shape.kills, "Kills in a seeded plan")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", o.shape.seed, "Seed of the plan")->capture_default_str();
  app.add_option("--save-kills", o.shape.save_kills, "Kills that land during a checkpoint write")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--shrink", shrink, "Node losses: the world sizes after each (e.g. 3,2); elastic restarts");
  app.add_option("--plan", o.plan_file,
                 "The kills to make instead of a seeded plan: lines 'RANK STEP step|during-save -|CAPACITY'");
  app.add_option("--ckpt-every", o.ckpt_every, "Checkpoint interval in steps")->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto* d_model =
      app.add_option("--d-model", o.d_model, "Model width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--model", o.model,
                 "A named shape instead of the small default (" + shardtrain::model_preset_names() +
                     "): its vocabulary in the synthetic corpus, one thread per rank")
      ->excludes(d_model);
  app.add_option("--pace-ms", o.pace_ms,
                 "Each step lasts at least this long (a delay in rank 0's data phase, no effect on the numbers), so "
                 "every kill lands at its planned step on a loaded machine; 0: none")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--global-batch", o.shape.global_batch, "Global batch (micro-batch 1)")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--bin", o.bin_dir, "Where ddp-train, data-prep and run-resilient are (default: this program's folder)");
  app.add_option("--work", o.work_dir, "Work folder, kept (default: a temporary folder, removed)");
  app.add_option("--report", o.report,
                 "When the proof holds, write {\"proof\": \"holds\", ...} here (release-gate's kill_resume evidence); "
                 "an existing file is removed first");
  shardtrain::add_version_flag(app);

  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    std::stringstream list(shrink);
    for (std::string w; std::getline(list, w, ',');) {
      if (w.empty() || w.find_first_not_of("0123456789") != std::string::npos || std::stoi(w) < 1)
        throw shardtrain::UsageError("--shrink takes world sizes like 3,2 (got '" + shrink + "')");
      o.shape.shrink.push_back(std::stoi(w));
    }
    if (!o.model.empty()) shardtrain::model_preset(o.model);  // an unknown name: exit 2 before any run
    if (o.bin_dir.empty()) o.bin_dir = std::filesystem::canonical("/proc/self/exe").parent_path().string();
    return launch::run_kill_resume_proof(o);
  });
}
