// The pipeline tool's options and its dispatch (shardtrain/tool/pipeline.hpp).
#include "shardtrain/tool/pipeline.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/pipeline/evidence.hpp"
#include "shardtrain/pipeline/pipeline.hpp"
#include "shardtrain/tool/tool.hpp"

namespace shardtrain::pipeline_tool {

void add_chain_options(CLI::App& app, pipeline::PipelineArgs& a) {
  // An option given again wins, as in a shell script's option loop: a user adds `--np 64` to a
  // saved command line and gets 64, not a refusal. The numbers are kept as the text given (each
  // stage's command line passes them on) and typed INT, so run_tool checks them as numbers
  // (tool/numbers.hpp) before anything runs.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--input", a.input, "The documents (JSONL) for data-prep");
  app.add_option("--cutoff", a.cutoff, "The training cutoff (RFC 3339)");
  app.add_option("--name", a.name, "The run's name: everything goes under ROOT/run/NAME");
  app.add_option("--np", a.np, "Ranks of the main run and the twin")->type_name("INT")->capture_default_str();
  app.add_option("--steps", a.steps, "Steps of the main run")->type_name("INT")->capture_default_str();
  app.add_option("--base-steps", a.base_steps, "Steps of the baseline, the twin and the scale points (default 40, or --steps if smaller)")
      ->type_name("INT");
  app.add_option("--scale-points", a.scale_points,
                 "More world sizes for the scaling report, e.g. 4,8 (1 and --np are already in it; under Slurm a W "
                 "the cluster cannot hold is left out, said so)");
  app.add_option("--seq-len", a.seq_len, "Context length")->type_name("INT")->capture_default_str();
  app.add_option("--model", a.model,
                 "Model and batch options of every training run, or a named shape (gpt2-small: the trainers' --model NAME)")
      ->capture_default_str();
  app.add_option("--device", a.device, "cpu or cuda")->capture_default_str();
  app.add_option("--check-replicas", a.check_replicas, "The main run's replica check interval (replica_checks)")
      ->type_name("INT")
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
}

CLI::App& add_cycles_command(CLI::App& app, pipeline::CyclesArgs& c) {
  // The continual cycles: a subcommand of their own (the chain keeps its command line, which
  // job scripts and the Slurm chain's own jobs use).
  CLI::App* cycles = app.add_subcommand(
      "cycles", "Continual release cycles under an arrival pattern, here or with --slurm as one Slurm chain (see\n"
                "pipeline cycles --help)");
  cycles->footer(
      "Per snapshot T_k, in WORK/cycle-<k>/: prep (data-prep --available-by T_k), monitor (release-gate monitor of\n"
      "the release in service on the documents after T_(k-1), rolled back when the policy says so; from cycle 2,\n"
      "skipped while a baseline is in service), train (ddp-train fine-tuned from last-known-good, or from scratch\n"
      "with --first-steps, to the cutoff T_k - HOLDOUT), decide (release-gate decide; an n-gram baseline\n"
      "ngram-cycle-<k> registered while nothing is in service), costs (the cycle's cost table); then WORK/costs.json\n"
      "for the whole pattern. Here one stage after the other, or with --slurm the whole pattern as one Slurm\n"
      "dependency chain, waited for. Exit 0 every cycle ran (a reject or a rollback is an outcome, not a failure);\n"
      "1 a stage failed (named); 2 a usage error or a job the cluster can never start. See pipeline(1).");
  cycles->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cycles->add_option("--input", c.input, "The documents (JSONL), each with its availability time");
  cycles->add_option("--snapshots", c.snapshots, "The snapshot times T1,T2,... (RFC 3339, each after the one before)");
  cycles->add_option("--holdout-s", c.holdout_s, "Seconds of hold-out before each snapshot: cutoff C_k = T_k - HOLDOUT")
      ->type_name("INT");
  cycles->add_option("--work", c.work, "The folder of the cycles (cycle-<k>/, costs.json); its cycle folders are started over");
  cycles->add_option("--registry", c.registry, "The release registry (default WORK/registry)");
  cycles->add_option("--policy", c.policy, "The release policy (default HOME/scripts/release-policy.json)");
  cycles->add_option("--bin", c.bin, "Where the tools are (default: this program's folder)");
  cycles->add_option("--home", c.home, "The clone holding scripts/release-policy.json (default $SHARDTRAIN_HOME, else found above this program)");
  cycles->add_option("--np", c.np, "Ranks of each training run")->type_name("INT")->capture_default_str();
  cycles->add_option("--steps", c.steps, "Training steps of a fine-tune")->type_name("INT")->capture_default_str();
  cycles->add_option("--first-steps", c.first_steps, "Training steps from scratch: cycle 1's, or with a baseline in service (default --steps)")
      ->type_name("INT");
  cycles->add_option("--baseline-order", c.baseline_order, "The n-gram order of a baseline registered while nothing is in service")
      ->type_name("INT")
      ->capture_default_str();
  cycles->add_option("--prep-args", c.prep_args, "data-prep options, e.g. \"--vocab 17 --tokenizer markov16\"");
  cycles->add_option("--train-args", c.train_args, "ddp-train's model and batch options");
  cycles->add_option("--gate-args", c.gate_args, "decide's and monitor's evaluation options");
  cycles->add_option("--baseline-args", c.baseline_args, "The baseline's options (its --max-samples must be decide's)");
  cycles->add_flag("--slurm", c.slurm, "Submit the pattern as Slurm jobs (one dependency chain) and wait for it");
  cycles->add_option("--sbatch", c.sbatch, "Slurm: options for every job, e.g. \"--partition=debug\"");
  cycles->add_option("--stage", c.stage, "Run this stage only, e.g. cycle-2/monitor (what each Slurm job runs)");
  return *cycles;
}

CLI::App& add_evidence_command(CLI::App& app, pipeline::EvidenceArgs& e) {
  // A run made outside the chain (the demo's, a user's own mpirun) gets the same evidence files,
  // made by the same commands as the chain's stages, where `release-gate decide` looks for them.
  CLI::App* evidence = app.add_subcommand(
      "evidence", "Make the release evidence of a run folder (RUN/evidence/) with the tools the chain's stages run");
  evidence->footer(
      "Each item asked for, in the rubric's order, with one line each: no_skipped_data (--data-prep: data-prep's\n"
      "summary copied), efficiency_report (--scaling: scale-bench report of --scaling-from's runs and RUN),\n"
      "deterministic_twin (--twin: equiv-check of the two files), kill_resume (--proof: kill-resume-proof). A\n"
      "failed item is said and the others still made. Exit 0 every tool exited 0; 1 one did not (an item that\n"
      "differs, such as a twin that is not equal, or a tool that failed); 2 a usage error. See pipeline(1).");
  evidence->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  evidence->add_option("run", e.run, "The run folder")->required();
  evidence->add_option("--data-prep", e.data_prep, "data-prep's JSON summary of the run's data");
  evidence->add_flag("--scaling", e.scaling, "The scaling report of RUN (scale-bench report)");
  evidence->add_option("--scaling-from", e.scaling_runs, "The runs before RUN in the scaling report, the W=1 run first (implies --scaling)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  evidence->add_option("--twin", e.twin, "Two files for equiv-check: the deterministic twin's, then RUN's own")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->expected(2);
  evidence->add_option("--twin-args", e.twin_args, "equiv-check's options, e.g. \"--group tensors\"");
  evidence->add_flag("--proof", e.proof, "Run the kill-and-resume proof");
  evidence->add_option("--proof-args", e.proof_args, "kill-resume-proof's options, e.g. \"--steps 12 --kills 1\"");
  evidence->add_option("--bin", e.bin, "Where the tools are (default: this program's folder)");
  return *evidence;
}

int run_pipeline_tool(CLI::App& app, const Subcommands& sub, const pipeline::PipelineArgs& chain_args, int argc,
                      char** argv) {
  const std::vector<std::string> self_args(argv + 1, argv + argc);  // what each stage job runs again
  return run_tool(app, argc, argv, {}, [&] {
    const std::string self = std::filesystem::canonical("/proc/self/exe").string();
    for (const CLI::App* command : {&sub.cycles, &sub.evidence}) {
      if (!command->parsed()) continue;
      for (const CLI::Option* o : app.get_options())
        if (o->count() > 0 && o->get_name() != "--help")
          throw UsageError(o->get_name() + " is an option of the release chain, not of '" + command->get_name() +
                           "' (see pipeline " + command->get_name() + " --help)");
    }
    if (sub.cycles.parsed()) return pipeline::run_cycles_command(sub.cycles_args, self, self_args);
    if (sub.evidence.parsed()) return pipeline::make_evidence(sub.evidence_args, self);
    return pipeline::run_chain_command(chain_args, self, self_args);
  });
}

}  // namespace shardtrain::pipeline_tool
