// pipeline: the release chain as a user runs it (data-prep, the kill-and-resume proof, baseline,
// twin, equiv-check, the main run, scale points, the scaling report, release-gate decide, costs),
// as Slurm jobs chained by dependencies or here with --local; one stage with --stage. Options + one
// call into libcore (pipeline/pipeline.hpp). See pipeline(1).
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "shardtrain/pipeline/pipeline.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace pipeline = shardtrain::pipeline;
  CLI::App app{"The release chain, producing its own evidence: data-prep, the kill-and-resume proof, a W=1 baseline,\n"
               "a deterministic twin, equiv-check, the main run, extra scale points, the scaling report, release-gate\n"
               "decide, then a cost table; all under ROOT/run/NAME. As Slurm jobs chained by dependencies (afterok;\n"
               "costs afterany), or one after the other here with --local; one stage with --stage. Exit 0 the chain\n"
               "ran (--local) or was submitted; 1 a stage failed (with --local or --stage: its own status); 2 a usage\n"
               "error or a job that cannot run here.",
               "pipeline"};
  // An option given again wins, as in a shell script's option loop: a user adds `--np 64` to a
  // saved command line and gets 64, not a refusal.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  pipeline::PipelineArgs a;
  app.add_option("--input", a.input, "The documents (JSONL) for data-prep");
  app.add_option("--cutoff", a.cutoff, "The training cutoff (RFC 3339)");
  app.add_option("--name", a.name, "The run's name: everything goes under ROOT/run/NAME");
  app.add_option("--np", a.np, "Ranks of the main run and the twin")->capture_default_str();
  app.add_option("--steps", a.steps, "Steps of the main run")->capture_default_str();
  app.add_option("--base-steps", a.base_steps, "Steps of the baseline, the twin and the scale points (default 40, or --steps if smaller)");
  app.add_option("--scale-points", a.scale_points,
                 "More world sizes for the scaling report, e.g. 4,8 (1 and --np are already in it; under Slurm a W "
                 "the cluster cannot hold is left out, said so)");
  app.add_option("--seq-len", a.seq_len, "Context length")->capture_default_str();
  app.add_option("--model", a.model, "Model and batch options of every training run")->capture_default_str();
  app.add_option("--device", a.device, "cpu or cuda")->capture_default_str();
  app.add_option("--check-replicas", a.check_replicas, "The main run's replica check interval (replica_checks)")
      ->capture_default_str();
  app.add_option("--registry", a.registry, "The release registry (default ROOT/run/registry)");
  app.add_option("--policy", a.policy, "The release policy (default HOME/scripts/release-policy.json)");
  app.add_option("--train-args", a.train_args, "Extra trainer options for every training run");
  app.add_option("--proof-args", a.proof_args, "kill-resume-proof's options, e.g. \"--steps 12 --kills 1\"");
  app.add_flag("--no-proof", [&](std::int64_t) { a.proof = false; }, "Skip the kill-and-resume proof");
  app.add_flag("--local", a.local, "Run every stage here, one after the other (no Slurm)");
  app.add_option("--stage", a.stage, "Run this stage only (what each Slurm job runs): prep, proof, baseline, twin, "
                                     "scale<W>, equiv, train, report, decide or costs");
  app.add_option("--bin", a.bin, "Where the tools are (default: this program's folder)");
  app.add_option("--root", a.root, "Where run/ goes (default HOME)");
  app.add_option("--home", a.home,
                 "The clone holding scripts/slurm/train.sbatch and scripts/release-policy.json (default "
                 "$SHARDTRAIN_HOME, else found above this program's folder)");
  app.add_option("--sbatch", a.sbatch, "Slurm: options for every job, e.g. \"--partition=short --account=me\"");
  app.add_option("--train-sbatch", a.train_sbatch,
                 "Slurm: options for the training jobs only, e.g. \"--time=12:00:00 --gpus-per-node=4\"");
  app.add_option("--launcher", a.launcher, "Slurm: srun or mpirun (train.sbatch's LAUNCHER)")->capture_default_str();
  shardtrain::add_version_flag(app);

  const std::vector<std::string> self_args(argv + 1, argv + argc);  // what each stage job runs again
  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    const std::filesystem::path self = std::filesystem::canonical("/proc/self/exe");
    if (a.bin.empty()) a.bin = self.parent_path().string();
    a.home = pipeline::find_home(a.home, self.parent_path().string());
    return pipeline::run_pipeline(pipeline::validate(a, std::filesystem::current_path().string()), self.string(),
                                  self_args);
  });
}
