// The stage graph run here (one stage, or all with --local) or submitted to Slurm (pipeline.hpp).
#include "shardtrain/pipeline/pipeline.hpp"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/slurm/submit.hpp"
#include "shardtrain/pipeline/evidence.hpp"
#include "shardtrain/telemetry/run_evidence.hpp"

namespace shardtrain::pipeline {

namespace fs = std::filesystem;

namespace {

void say(const Settings& s, const std::string& message) {
  std::cout << "pipeline [" << s.name << "]: " << message << std::endl;
}


std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(dir + ": cannot create the folder (" + ec.message() + ")");
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) throw IoError(path + ": cannot write");
}

// A step stage's commands, run in order; the first non-zero status ends the stage.
int run_step(const Settings& s, const Stage& st, const StageGraph& graph) {
  const auto evidence = [&](const char* path) { return s.run + "/" + path; };
  if (st.name == "prep") {
    make_dirs(fs::path(evidence(run_evidence::kDataPrep)).parent_path().string());
    // Its JSON summary on stdout is the no_skipped_data evidence; its log lines stay on stderr.
    const ChildOutput out = run_child_captured({s.bin + "/data-prep", s.input, "-o", s.data});
    write_text(evidence(run_evidence::kDataPrep), out.out);
    if (out.status != 0) return out.status;
    const auto j = nlohmann::json::parse(out.out, nullptr, false);
    if (!j.is_discarded() && j.contains("documents") && j.contains("rejects"))
      say(s, "data-prep: " + j["documents"].dump() + " documents, " + j["rejects"].value("count", nlohmann::json()).dump() +
                 " rejected");
    return 0;
  }
  if (st.name == "proof") {
    make_dirs(fs::path(evidence(run_evidence::kKillResume)).parent_path().string());
    return run_child(kill_resume_command(s.bin, s.run, split_words(s.proof_args)));
  }
  if (st.name == "equiv")
    return run_child(equivalence_command(s.bin, s.run, s.run + "/twin/params.h5", s.run + "/baseline/params.h5", {}));
  if (st.name == "report") {
    // The baseline, the scale points that left a summary (under Slurm one the cluster cannot hold
    // was never submitted), then the main run.
    std::vector<std::string> earlier = {s.run + "/baseline"};
    for (const Stage& point : graph.stages)
      if (point.kind == StageKind::kTrain && point.name.rfind("scale", 0) == 0 && fs::exists(point.run_dir + "/summary.json"))
        earlier.push_back(point.run_dir);
    return run_child(scaling_report_command(s.bin, s.run, earlier));
  }
  if (st.name == "decide") {
    if (!fs::exists(s.registry + "/baselines/bigram.json")) {
      const int rc = run_child({s.bin + "/release-gate", "baseline", "bigram", "--registry", s.registry, "--data", s.data,
                                "--cutoff", s.cutoff, "--order", "2", "--seq-len", std::to_string(s.seq_len)});
      if (rc != 0) return rc;
    }
    const std::string base = fs::exists(s.registry + "/last-known-good") ? "last-known-good" : "bigram";
    // The cost table of every stage so far goes into the release record (decide reads
    // RUN/costs.json); the costs stage rewrites it with the last stages once the chain is done.
    if (run_child_captured({s.bin + "/release-gate", "costs", s.run}).status != 0)
      say(s, "release-gate costs failed: the record will say costs null");
    return run_child({s.bin + "/release-gate", "decide", s.run + "/checkpoints", "--policy", s.policy, "--registry",
                      s.registry, "--baseline", base, "--data", s.data, "--cutoff", s.cutoff, "--run-dir", s.run});
  }
  if (st.name == "costs") return run_child({s.bin + "/release-gate", "costs", s.run});
  throw Error(ExitCode::kInternal, "stage '" + st.name + "' has no command");
}

int run_stage_body(const Settings& s, const Stage& st, const StageGraph& graph) {
  try {
    if (st.kind == StageKind::kTrain) return run_child(local_train_argv(s, st));
    return run_step(s, st, graph);
  } catch (const Error& e) {  // a tool not found, a folder not writable: the stage failed, said why
    std::cerr << "pipeline [" << s.name << "]: stage " << st.name << ": " << e.what() << std::endl;
    return static_cast<int>(e.code());
  }
}

std::string joined(const std::vector<std::string>& words, const std::string& sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

// The training jobs' script, HOME/scripts/slurm/train.sbatch; UsageError when sbatch or it is missing.
std::string require_train_sbatch(const Settings& settings) {
  if (find_on_path("sbatch").empty()) throw UsageError("sbatch not found: run on a Slurm login node, or use --local");
  const std::string train_sbatch_file = settings.home + "/scripts/slurm/train.sbatch";
  if (settings.home.empty() || !fs::exists(train_sbatch_file))
    throw UsageError("scripts/slurm/train.sbatch not found" + (settings.home.empty() ? "" : " in " + settings.home) +
                     ": give --home (the clone holding scripts/) or set SHARDTRAIN_HOME");
  return train_sbatch_file;
}

void export_training_environment(const Settings& settings) {
  // MODEL and TRAIN_ARGS hold spaces and commas (which --export would split): they reach the
  // training jobs through this environment (--export=ALL).
  std::string schedule = " --decay-steps " + std::to_string(settings.steps);
  for (const auto& w : join(split_words(settings.model), split_words(settings.train_args)))
    if (w == "--decay-steps") schedule = "";
  setenv("MODEL", settings.model.c_str(), 1);
  const std::string train_env = "--cutoff " + settings.cutoff + " --check-replicas " +
                                std::to_string(settings.check_replicas) + schedule + " " + settings.train_args;
  setenv("TRAIN_ARGS", train_env.c_str(), 1);
}

// The settings with only the scale points this cluster can hold (the others said so), after
// every job shape is checked.
Settings with_fitting_shapes(const Settings& settings, const std::vector<std::string>& user,
                             const std::vector<std::string>& train_opts) {
  // Every job shape, checked before anything is submitted: a request this cluster can never
  // satisfy (more tasks than a node or partition holds, an unknown partition or account) fails here.
  const std::string hint = "change --np, --sbatch or --train-sbatch";
  slurm::require_job_shape("1-task", join({"--ntasks=1"}, user), hint);
  if (settings.proof) slurm::require_job_shape("proof (2-task)", join({"--ntasks=2"}, user), hint);
  slurm::require_job_shape("training (" + std::to_string(settings.np) + " ranks)",
                    join({"--ntasks=" + std::to_string(settings.np)}, train_opts), hint);
  Settings fitting = settings;
  fitting.scale.clear();
  for (int w : settings.scale) {
    if (slurm::job_shape_fits(join({"--ntasks=" + std::to_string(w)}, train_opts)))
      fitting.scale.push_back(w);
    else
      say(settings, "W=" + std::to_string(w) + " does not fit this cluster (sbatch --test-only --ntasks=" +
                        std::to_string(w) + "): left out of the scaling report");
  }
  return fitting;
}

// What every job of one submission shares: the user's sbatch options, the training script, and the
// command line a step job runs again.
struct ChainJobs {
  const Settings& settings;
  std::vector<std::string> user, train_opts;
  std::string train_sbatch_file, wrap;

  // The sbatch command line of stage `st`'s job.
  std::vector<std::string> argv(const Stage& st, const std::string& dependency) const {
    std::vector<std::string> argv = slurm::chain_job_argv(user, settings.name + "-" + st.name,
                                                          settings.run + "/slurm-" + st.name + "-%j.out", st.ranks,
                                                          dependency);
    if (st.kind == StageKind::kTrain) {
      argv.push_back("--export=ALL,SHARDTRAIN_HOME=" + settings.home + ",SHARDTRAIN_BIN=" + settings.bin +
                     ",RUN_DIR=" + st.run_dir + ",DATA=" + settings.data + ",STEPS=" + std::to_string(st.steps) +
                     ",SEQ_LEN=" + std::to_string(settings.seq_len) + ",DEVICE=" + settings.device +
                     ",LAUNCHER=" + settings.launcher + ",DETERMINISTIC=1");
      argv = join(argv, train_opts);
    }
    if (st.kind == StageKind::kTrain) argv.push_back(train_sbatch_file);
    else argv = join(argv, {"--wrap", wrap + " --stage " + st.name});
    return argv;
  }
};

using SubmittedJobs = std::vector<slurm::ListedJob>;

// A job pending for a reason that does not clear by itself: cancel the chain and say which. (A
// failed upstream job is not one: --kill-on-invalid-dep cancels what depends on it.) True when cancelled.
bool cancelled_never_starting(const Settings& settings, const SubmittedJobs& submitted) {
  std::vector<std::string> ids;
  for (const auto& j : submitted) ids.push_back(j.job_id);
  const std::vector<std::string> bad = slurm::cancel_if_never_starting(ids, pending_check_s());
  if (bad.empty()) return false;
  std::cerr << slurm::never_starting_message("pipeline [" + settings.name + "]", bad) << std::endl;
  return true;
}

void say_submitted(const Settings& settings, const StageGraph& graph, const SubmittedJobs& submitted) {
  std::map<std::string, std::string> id;
  for (const auto& j : submitted) id[j.stage] = j.job_id;
  const std::string& run = settings.run;
  std::string line;
  for (const Stage& st : graph.stages) line += (line.empty() ? " " : ", ") + st.name + " " + id[st.name];
  say(settings, "submitted:" + line);
  say(settings, "job ids: " + run + "/jobs.txt; outputs: " + run + "/slurm-<stage>-<id>.out; the decision: " + run +
                    "/slurm-decide-" + id["decide"] + ".out; costs: " + run + "/costs.json");
}

}  // namespace

std::vector<slurm::ListedJob> submit_graph(const StageGraph& graph, const SbatchArgv& sbatch_argv) {
  std::map<std::string, std::string> id;
  std::vector<slurm::ListedJob> submitted;
  auto submit = [&](const Stage& st, const std::string& dependency) {
    std::string job;
    try {
      job = slurm::submit_job(sbatch_argv(st, dependency));
    } catch (const IoError& e) {
      std::vector<std::string> ids;
      for (const auto& j : submitted) ids.push_back(j.job_id);
      slurm::cancel_jobs(ids);
      throw Error(ExitCode::kFailure, "stage " + st.name + ": " + e.what() + "; the jobs submitted before it were cancelled");
    }
    id[st.name] = job;
    submitted.push_back({st.name, job});
  };
  std::string all;
  for (const Stage& st : graph.stages) {
    if (st.after_all) continue;
    std::vector<std::string> deps;
    for (const auto& need : st.needs) deps.push_back(id.at(need));
    submit(st, deps.empty() ? "" : "afterok:" + joined(deps, ":"));
    all += (all.empty() ? "" : ":") + id[st.name];
  }
  // After all of them, whatever their outcome.
  for (const Stage& st : graph.stages)
    if (st.after_all) submit(st, "afterany:" + all);
  return submitted;
}

double pending_check_s() {
  const char* wait_env = std::getenv("PIPELINE_PENDING_CHECK_S");
  return wait_env ? std::atof(wait_env) : 3.0;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_command(const std::string& program, const std::vector<std::string>& args) {
  std::string out = shell_quote(program);
  for (const auto& a : args) {
    out += ' ';
    out += shell_quote(a);
  }
  return out;
}

int run_one_stage(const Settings& s, const std::string& name) {
  const StageGraph graph = build_graph(s);
  const Stage& st = stage_named(graph, name);
  StageRecord r;
  r.stage = st.name;
  r.ranks = st.ranks;
  r.start = unix_now();
  r.exit_status = run_stage_body(s, st, graph);
  r.end = unix_now();
  if (const char* job = std::getenv("SLURM_JOB_ID")) r.job_id = job;
  append_stage_record(s.run + "/stages.jsonl", r);
  return r.exit_status;
}

int run_local(const Settings& s) {
  const StageGraph graph = build_graph(s);
  make_dirs(s.run);
  write_text(s.run + "/stages.jsonl", "");
  int rc = 0;
  for (const Stage& st : graph.stages) {
    if (st.after_all) continue;
    say(s, "stage " + st.name);
    rc = run_one_stage(s, st.name);
    if (rc != 0) {
      say(s, "stage " + st.name + " failed (exit " + std::to_string(rc) + ")");
      break;
    }
  }
  for (const Stage& st : graph.stages)
    if (st.after_all) run_one_stage(s, st.name);  // the cost table whatever happened; its own failure is said
  return rc;
}

int submit_slurm(const Settings& settings, const std::string& self, const std::vector<std::string>& self_args) {
  const std::string train_sbatch_file = require_train_sbatch(settings);
  const std::vector<std::string> user = split_words(settings.sbatch), user_train = split_words(settings.train_sbatch);
  const ChainJobs jobs{settings, user, join(user, user_train), train_sbatch_file, shell_command(self, self_args)};
  make_dirs(settings.run);
  write_text(settings.run + "/stages.jsonl", "");
  export_training_environment(settings);
  // The graph of the scale points kept: the report's points follow them.
  const StageGraph graph = build_graph(with_fitting_shapes(settings, user, jobs.train_opts));

  // The cost table (costs, after_all) runs after all of them, whatever their outcome, and reads
  // Slurm's record of each job listed in jobs.txt.
  const SubmittedJobs submitted =
      submit_graph(graph, [&](const Stage& st, const std::string& dependency) { return jobs.argv(st, dependency); });
  slurm::write_job_list(settings.run + "/jobs.txt", submitted);
  if (cancelled_never_starting(settings, submitted)) return static_cast<int>(ExitCode::kUsage);
  say_submitted(settings, graph, submitted);
  return 0;
}

std::string find_home(const std::string& given, const std::string& exe_dir) {
  if (!given.empty()) return fs::absolute(given).lexically_normal().string();
  if (const char* env = std::getenv("SHARDTRAIN_HOME"); env && *env) return env;
  fs::path dir = exe_dir;
  for (int up = 0; up < 2 && dir.has_parent_path(); ++up) {
    dir = dir.parent_path();
    if (fs::exists(dir / "scripts/slurm/train.sbatch")) return dir.string();
  }
  return "";
}

int run_chain_command(PipelineArgs args, const std::string& self, const std::vector<std::string>& self_args) {
  const std::string exe_dir = fs::path(self).parent_path().string();
  if (args.bin.empty()) args.bin = exe_dir;
  args.home = find_home(args.home, exe_dir);
  return run_pipeline(validate(args, fs::current_path().string()), self, self_args);
}

int run_pipeline(const Settings& s, const std::string& self, const std::vector<std::string>& self_args) {
  // Local stages start mpirun as whoever runs this (root in a container) on however many cores.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  if (!s.stage.empty()) return run_one_stage(s, s.stage);
  if (s.local) return run_local(s);
  return submit_slurm(s, self, self_args);
}

}  // namespace shardtrain::pipeline
