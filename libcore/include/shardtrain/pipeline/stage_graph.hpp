// The release chain's stage graph, declared once: data-prep, the kill-and-resume proof, the W=1
// baseline, the deterministic twin, the extra scale points, equiv-check, the main run, the scaling
// report, release-gate decide, then the cost table. One pure function builds it from the options;
// the local runner and the Slurm submitter (pipeline.hpp) both walk it, so the two cannot disagree
// about what runs after what.
#pragma once
#include <string>
#include <vector>

namespace shardtrain::pipeline {

// The command line as given (everything a string, as the user typed it): validate() checks it with
// the same one-line messages the shell pipeline gave, so scripts that grep them keep working.
struct PipelineArgs {
  std::string input, cutoff, name;
  std::string np = "2", steps = "200", base_steps;  // base_steps "": 40, or --steps if smaller
  std::string scale_points;                          // "4,8"
  std::string seq_len = "256";
  std::string model = "--layers 4 --d-model 256 --heads 4 --global-batch 16 --micro-batch 8 --eval-samples 128";
  std::string device = "cpu";
  std::string check_replicas = "50";
  std::string registry;  // "": ROOT/run/registry
  std::string policy;    // "": HOME/scripts/release-policy.json
  std::string train_args, proof_args;
  bool proof = true;
  bool local = false;
  std::string stage;  // "": the whole chain
  std::string bin;    // "": the folder of this program
  std::string root;   // "": HOME, else the current folder
  std::string home;   // the clone holding scripts/slurm/train.sbatch ("": found by the tool)
  std::string sbatch, train_sbatch;
  std::string launcher = "srun";
};

// The options checked and completed: numbers parsed, paths absolute, defaults filled in.
struct Settings {
  std::string input, cutoff, name;
  int np = 2, steps = 200, base_steps = 40, seq_len = 256, check_replicas = 50;
  std::vector<int> scale;  // extra world sizes, in the order given, without 1, --np or repeats
  std::string model, train_args, proof_args, device, launcher;
  std::string registry, policy, bin, root, home;
  std::string sbatch, train_sbatch;
  bool proof = true, local = false;
  std::string stage;
  std::string run;   // ROOT/run/NAME
  std::string data;  // RUN/data.h5
};

// Throws UsageError (exit 2) with the shell pipeline's message for: a missing --input, --cutoff or
// --name; a --np, --steps, --seq-len, --check-replicas or --base-steps that is not a positive whole
// number; a --scale-points entry that is not one; --device other than cpu/cuda; --launcher other
// than srun/mpirun. Relative --root and --input are made absolute against `cwd`. Pure: reads no
// file, so `home` must already be resolved (or "" when none was found: --policy then stays "").
Settings validate(const PipelineArgs& args, const std::string& cwd);

// --model as the trainers get it: one word that is not an option (gpt2-small) is a named shape,
// "--model WORD" (the trainers check the name); anything else is trainer options as written.
std::string model_options(const std::string& model);

enum class StageKind {
  kStep,   // one command of the runner (data-prep, equiv-check, release-gate, ...), one task
  kTrain,  // a training run: ddp-train under run-resilient (--local) or train.sbatch (Slurm)
};

struct Stage {
  std::string name;
  StageKind kind = StageKind::kStep;
  int ranks = 1;
  std::string run_dir;             // training stages: the run folder; "" otherwise
  int steps = 0;                   // training stages: optimizer steps; 0 otherwise
  std::vector<std::string> needs;  // stages it runs after (afterok), all in the graph
  std::vector<std::string> outputs;  // what it leaves, relative to RUN (docs and checks)
  bool after_all = false;  // runs once every other stage ended, whatever their outcome (costs)
  // The highest exit status that is an outcome, not a failure: 0 in the release chain (a reject
  // stops it); 1 for the continual cycles' monitor and decide (a rollback or a reject is what a
  // cycle may well find, and the next cycle goes on from it).
  int ok_up_to = 0;
};

// Stages in an order that runs every stage after its needs; the after_all stage (costs) last.
struct StageGraph {
  std::vector<Stage> stages;
  // The stage named `name`, or nullptr.
  const Stage* find(const std::string& name) const;
  // Every name in order, space-separated (the usage error's list).
  std::string names() const;
};

// The graph of these settings: prep, proof (unless --no-proof), baseline, twin, scale<W> for each
// W of settings.scale, equiv, train, report (after baseline, train and every scale point in the
// graph), decide, costs. A need that is not in the graph (proof with --no-proof) is dropped. To
// leave out scale points the cluster cannot hold, build it from settings whose `scale` lost them.
StageGraph build_graph(const Settings& settings);

// The stage named `name` of `graph`; throws UsageError "unknown stage 'X' (prep proof ... costs)".
const Stage& stage_named(const StageGraph& graph, const std::string& name);

// `text` as a positive whole number (no sign, no leading zero, fits an int); else UsageError
// "OPTION must be a positive whole number (got 'TEXT')", the shell scripts' message.
int require_positive(const std::string& text, const std::string& option);

// `path` made absolute against `cwd` (unchanged when it already is, or empty).
std::string absolute_path(const std::string& path, const std::string& cwd);

// The whitespace-separated words of an option value ("--layers 4 --heads 2"), as bash's read -a
// splits them (no quoting).
std::vector<std::string> split_words(const std::string& text);

// The trainer options every training run of the chain shares (the scaling report and the twin
// compare like with like): data, cutoff, sequence length, model, device, --deterministic,
// --check-replicas, --decay-steps STEPS unless --model or --train-args set it, then --train-args.
std::vector<std::string> common_train_args(const Settings& settings);

// The command of a training stage under --local: run-resilient (3 restarts, backoff 2, its log in
// the stage's folder) around mpirun -np RANKS ddp-train ... --resume auto --run-dir DIR.
std::vector<std::string> local_train_argv(const Settings& settings, const Stage& stage);


}  // namespace shardtrain::pipeline
