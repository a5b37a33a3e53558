// Running the stage graph (stage_graph.hpp): one stage, every stage here (--local), or every stage
// as a Slurm job chained by dependencies. Every child runs through base's subprocess helpers
// (an argument vector, no shell), except the command a Slurm job runs, which sbatch --wrap takes
// as shell text: its words are quoted one by one.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardtrain/pipeline/stage_graph.hpp"
#include "shardtrain/slurm/job_list.hpp"
#include "shardtrain/telemetry/stage_record.hpp"

namespace shardtrain::pipeline {

// One line of RUN/stages.jsonl, the cost table's local figures (decision/cost_accounting.hpp reads
// it): {"stage", "ranks", "start", "end" (Unix seconds), "wall_s", "exit_status", "job_id" (the
// Slurm job, null outside one)}.

// Runs stage `name` of the settings' graph (UsageError naming the stages when there is none),
// timed: appends its StageRecord to RUN/stages.jsonl (job_id from $SLURM_JOB_ID). Returns the
// stage's exit status: its command's, or the exit code of the error that stopped it (a missing
// tool: 3).
int run_one_stage(const Settings& settings, const std::string& name);

// --local: every stage in graph order, each through run_one_stage after RUN/stages.jsonl is
// emptied; stops at the first failure, then runs costs whatever happened. Returns 0, or the
// failed stage's status.
int run_local(const Settings& settings);

// Slurm: checks every job shape with sbatch --test-only (UsageError, exit 2, naming sbatch's answer
// when one cannot run here), leaves out scale points that do not fit (said so), submits one job per
// stage (--dependency=afterok on its needs, --kill-on-invalid-dep=yes, --open-mode=append, output
// RUN/slurm-<stage>-<id>.out; training stages through HOME/scripts/slurm/train.sbatch, the others
// as `SELF ARGS... --stage NAME`), costs with afterany on all of them, writes RUN/jobs.txt ("stage
// id" lines), then cancels the chain (exit 2) when a job pends for a reason that never clears
// (waiting $PIPELINE_PENDING_CHECK_S seconds first, default 3). `self` and `self_args` are this
// program and its command line, which each step job runs again with --stage. Returns 0 submitted.
int submit_slurm(const Settings& settings, const std::string& self, const std::vector<std::string>& self_args);

// ---- the graph submitter, shared by the release chain and the continual cycles (cycles.hpp); ----
// ---- the sbatch commands themselves are slurm/submit.hpp's                                  ----

// The whole sbatch command line of one stage's job, given its --dependency value ("" for none).
using SbatchArgv = std::function<std::vector<std::string>(const Stage& stage, const std::string& dependency)>;
// Submits every stage of `graph` in graph order, each with `sbatch_argv`: a stage with needs after
// them (afterok:IDS), an after_all stage after every other (afterany:IDS). The argv must ask for
// --parsable (slurm::chain_job_argv does). Returns each stage's job, in graph order (what
// slurm::write_job_list writes to jobs.txt). When one sbatch fails, cancels the jobs submitted
// before it and throws Error (exit 1) naming the stage.
std::vector<slurm::ListedJob> submit_graph(const StageGraph& graph, const SbatchArgv& sbatch_argv);
// The seconds to wait before asking squeue why the chain's jobs pend (slurm/submit.hpp,
// cancel_if_never_starting): $PIPELINE_PENDING_CHECK_S, default 3.
double pending_check_s();

// The tool's body: --stage NAME, else --local, else Slurm. Sets the Open MPI environment the
// local stages need (as root, oversubscribed) for every child.
int run_pipeline(const Settings& settings, const std::string& self, const std::vector<std::string>& self_args);

// The pipeline tool's chain as a user gave it: --bin defaults to the folder of `self` (this program,
// as /proc/self/exe names it), --home is found from that folder (find_home); then validate()
// against the current folder (UsageError) and run_pipeline. Returns run_pipeline's status.
int run_chain_command(PipelineArgs args, const std::string& self, const std::vector<std::string>& self_args);

// The clone whose scripts/slurm/train.sbatch the training jobs run: `given` (--home) when set,
// else $SHARDTRAIN_HOME, else the first of the two folders above `exe_dir` that holds it (a
// build's bin/ inside the clone: CLONE/build/bin); "" when none does (the Slurm submitter then
// asks for --home; --local needs only --policy).
std::string find_home(const std::string& given, const std::string& exe_dir);

// `word` quoted for a POSIX shell ('...' with ' written '\''), as sbatch --wrap needs it.
std::string shell_quote(const std::string& word);
// `program` and `args` as one shell command line, each word quoted (what a stage job runs again).
std::string shell_command(const std::string& program, const std::vector<std::string>& args);

}  // namespace shardtrain::pipeline
