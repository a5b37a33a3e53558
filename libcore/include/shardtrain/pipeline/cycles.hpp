// Continual release cycles under an arrival pattern (`pipeline cycles`): snapshot k is the input's
// documents available by T_k; cycle k, in WORK/cycle-<k>/, prepares it (prep), scores the release
// in service on the documents after T_(k-1) and rolls it back when the policy says so (monitor,
// from cycle 2), fine-tunes from last-known-good to the cutoff C_k = T_k - HOLDOUT (train), decides
// (decide: an n-gram baseline registered first while nothing is in service) and measures its cost
// table (costs); after the last cycle, the pattern's table (total).
//
// The stages of every cycle are declared once, as one StageGraph of the whole pattern (stage names
// "cycle-<k>/<step>" and "total"): the local runner walks it in order, the Slurm submitter submits
// it as one dependency chain. What a stage does that depends on the registry (skip the monitor
// while a baseline is in service, fine-tune or train from scratch, register a baseline) is decided
// when the stage runs, from the registry as it is then (plan_cycle_stage, pure): so the whole
// pattern can be submitted at once and every job still sees what the jobs before it left.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/pipeline/stage_graph.hpp"

namespace shardtrain::pipeline {

// The command line as given (everything a string): validate_cycles() checks it with the one-line
// messages scripts/cycles.sh gave (the script this replaced; scripts grep them).
struct CyclesArgs {
  std::string input, snapshots, holdout_s, work;
  std::string registry;  // "": WORK/registry
  std::string policy;    // "": HOME/scripts/release-policy.json
  std::string bin;       // "": the folder of this program (set by the tool)
  std::string home;      // the clone (set by the tool: --home, $SHARDTRAIN_HOME or found)
  std::string np = "1", steps = "60", first_steps;  // first_steps "": --steps
  std::string baseline_order = "1";
  std::string prep_args, train_args, gate_args, baseline_args;
  bool slurm = false;
  std::string sbatch;
  std::string stage;  // "": every stage; else the one stage a Slurm job runs
};

// One snapshot: T_k as given (what data-prep --available-by and monitor --since are given), its
// Unix seconds, and the training cutoff C_k = T_k - HOLDOUT as RFC 3339.
struct Snapshot {
  std::string time;
  std::int64_t unix_s = 0;
  std::string cutoff;
};

struct CyclesSettings {
  std::string input, work, registry, policy, bin;
  int np = 1, steps = 60, first_steps = 60, baseline_order = 1;
  std::int64_t holdout_s = 0;
  std::vector<Snapshot> snapshots;  // in the order given: strictly later each
  std::vector<std::string> prep_args, train_args, gate_args, baseline_args;
  bool slurm = false;
  std::vector<std::string> sbatch;
  std::string stage;
  std::string cycle_dir(int k) const;  // WORK/cycle-<k>
};

// Throws UsageError (exit 2) with those messages: "--input, --snapshots, --holdout-s and
// --work are required (see --help)"; "--np must be a positive whole number (got 'x')" (also
// --steps, --first-steps, --holdout-s, --baseline-order); "--snapshots: 'X' is not a time (...)"
// for an entry that is not an RFC 3339 date-time; "--snapshots: 'B' is not after 'A' (...)";
// "--policy: ..." when none was given and no clone holds scripts/release-policy.json. Relative
// paths are made absolute against `cwd`. Pure: reads no file.
CyclesSettings validate_cycles(const CyclesArgs& args, const std::string& cwd);

// The whole pattern's graph: for each cycle k, "cycle-<k>/prep" (no need: the snapshot depends on
// the input alone), "cycle-<k>/monitor" (k >= 2; after this cycle's prep and the previous cycle's
// decide, whose registry it reads), "cycle-<k>/train" (after prep and the monitor, which may have
// moved the pointer it fine-tunes from; np ranks), "cycle-<k>/decide" (after train), "cycle-<k>/costs"
// (after decide, the cycle's last job); then "total" (after_all). monitor and decide have
// ok_up_to 1 (a rollback, a reject). Every stage's run_dir is its cycle folder (WORK for total).
StageGraph build_cycles_graph(const CyclesSettings& settings);

// "cycle-3/monitor" -> {3, "monitor"}; "total" -> {0, "total"}.
struct CycleStageName {
  int cycle = 0;
  std::string step;
};
CycleStageName parse_cycle_stage_name(const std::string& name);

// What is in service, from the registry's `last-known-good` pointer (docs/FORMATS.md, "Release
// registry"; read here, not through the decision layer, so that this tool carries no trainer):
// nothing, a release (its checkpoint), or a baseline a rollback put back (its name).
struct InService {
  enum class Kind { kNone, kRelease, kBaseline } kind = Kind::kNone;
  std::string checkpoint;     // kRelease
  std::string baseline_name;  // kBaseline
};
// The pointer's text (`path` names it in errors). IoError (exit 3) for text that is not a pointer
// (not JSON, a format_version above 2, a release without a checkpoint). Pure.
InService in_service_from_pointer(const std::string& text, const std::string& path);
// REGISTRY/last-known-good read (kNone when there is none).
InService read_in_service(const std::string& registry);

// One command of a stage: its argument vector, the log its output goes to (stdout and stderr), and
// the highest exit status that is an outcome (release-gate decide's reject: 1).
struct StageCommand {
  std::vector<std::string> argv;
  std::string log;
  int ok_up_to = 0;
};
// What a stage does, decided when it runs: its commands in order, or why it is skipped.
struct StagePlan {
  std::string skipped;  // "": it runs
  std::vector<StageCommand> commands;
};
// The plan of `stage` given what is in service and the training's sequence length (from its
// summary.json; used only to register an n-gram baseline when nothing is in service):
//   prep     data-prep INPUT -o DIR/data.h5 --available-by T_k PREP_ARGS --progress-interval 0
//   monitor  release-gate monitor ... --since T_(k-1): a release in service; else skipped ("baseline
//            NAME in service: nothing to monitor", "no release in service: nothing to monitor")
//   train    mpirun -np N ddp-train --data --cutoff C_k --steps S --ckpt-every S --run-dir DIR, with
//            --resume CHECKPOINT --fine-tune and --steps when a release is in service, else
//            --first-steps from scratch; then TRAIN_ARGS
//   decide   release-gate decide DIR/checkpoints --baseline last-known-good; with nothing in service
//            first release-gate baseline ngram-cycle-<k> (--order, --seq-len, BASELINE_ARGS) and
//            --baseline ngram-cycle-<k>
//   costs    release-gate costs DIR --registry REG
//   total    release-gate costs DIR_1 ... DIR_n --registry REG --total WORK/costs.json
// Logs: DIR/<step>.log (the baseline's DIR/baseline.log; total's WORK/costs.log). Pure.
StagePlan plan_cycle_stage(const CyclesSettings& settings, const Stage& stage, const InService& in_service,
                           int train_seq_len);

// The lines a stage's outcome is told in, from what it left (the same in every mode: under Slurm
// they are read after the jobs ran): prep "snapshot as of T: N documents (M not yet available)"
// (its JSON summary), monitor its verdict and "rolled back:" lines joined (or why it was skipped),
// decide its decision and first three reason lines joined. `log_text` is the stage's log,
// `prep_summary` data-prep's JSON summary (prep only). Pure.
std::vector<std::string> cycle_stage_lines(const CycleStageName& name, const Snapshot& snapshot,
                                           const std::string& log_text, const std::string& prep_summary);


// ---- running it (cycles.cpp) -----------------------------------------------------------------

// Runs one stage now, from the registry as it is: its plan's commands in order (the first whose
// status is above its ok_up_to ends the stage), timed into DIR/stages.jsonl (job_id from
// $SLURM_JOB_ID) unless skipped (its log then says why). Returns the stage's status (a missing
// tool: 3).
int run_cycle_stage(const CyclesSettings& settings, const Stage& stage);

// The tool's body: --stage NAME (what a Slurm job runs: exit 0 when the stage's status is an
// outcome, else that status), else --slurm (the pattern as one dependency chain, waited for), else
// every stage here in order. Removes and re-creates every cycle folder first (not with --stage).
// Returns 0 every cycle ran; 1 a stage failed (named, its log's last lines on stderr); 2 a usage
// error or a job the cluster can never start.
int run_cycles(const CyclesSettings& settings, const std::string& self, const std::vector<std::string>& self_args);

// `pipeline cycles` as a user gave it: --bin defaults to the folder of `self` (this program, as
// /proc/self/exe names it), --home is found from that folder (pipeline.hpp find_home); then
// validate_cycles() against the current folder (UsageError) and run_cycles. Returns run_cycles'
// status.
int run_cycles_command(CyclesArgs args, const std::string& self, const std::vector<std::string>& self_args);

}  // namespace shardtrain::pipeline
