// The continual cycles run: one stage (what a Slurm job runs), every stage here, or the whole
// pattern as one Slurm dependency chain (cycles.hpp). Every child through base's subprocess
// helpers; the Slurm jobs through the pipeline's submitter (pipeline.hpp).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/pipeline/cycles.hpp"

#include "shardtrain/base/time.hpp"
#include "shardtrain/slurm/accounting.hpp"
#include "shardtrain/slurm/submit.hpp"
#include "shardtrain/pipeline/pipeline.hpp"
#include "shardtrain/telemetry/run_evidence.hpp"

namespace shardtrain::pipeline {

namespace fs = std::filesystem;

namespace {

void say(const CycleStageName& n, const std::string& message) {
  std::cout << "pipeline cycles" << (n.cycle > 0 ? " [cycle " + std::to_string(n.cycle) + "]" : std::string()) << ": "
            << message << std::endl;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text(const std::string& path, const std::string& text, std::ios::openmode mode = std::ios::trunc) {
  std::ofstream out(path, std::ios::out | mode);
  out << text;
  if (!out.flush()) throw IoError(path + ": cannot write");
}

// The last `n` lines of `text`.
std::string tail(const std::string& text, int n) {
  std::size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;
  std::size_t pos = end;
  for (int i = 0; i < n; ++i) {
    const std::size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text.substr(0, end);
    pos = nl;
  }
  return text.substr(pos + 1, end - pos - 1);
}

std::string log_of(const Stage& st) {
  const CycleStageName n = parse_cycle_stage_name(st.name);
  return st.run_dir + "/" + (n.step == "total" ? std::string("costs") : n.step) + ".log";
}

const Snapshot& snapshot_of(const CyclesSettings& s, const CycleStageName& n) {
  static const Snapshot none;
  return n.cycle >= 1 && n.cycle <= int(s.snapshots.size()) ? s.snapshots[n.cycle - 1] : none;
}

// The outcome lines of a stage that ran, from what it left.
std::vector<std::string> lines_of(const CyclesSettings& s, const Stage& st) {
  const CycleStageName n = parse_cycle_stage_name(st.name);
  return cycle_stage_lines(n, snapshot_of(s, n), read_text(log_of(st)),
                           n.step == "prep" ? read_text(st.run_dir + "/" + run_evidence::kDataPrep) : "");
}

// The outcome lines said (callers say a failed stage's failure instead).
void say_lines(const CyclesSettings& s, const Stage& st) {
  for (const auto& line : lines_of(s, st))
    if (!line.empty()) say(parse_cycle_stage_name(st.name), line);
}

std::vector<std::string> with_tasks(int tasks, std::vector<std::string> options) {
  options.insert(options.begin(), "--ntasks=" + std::to_string(tasks));
  return options;
}

// The training's sequence length, which an n-gram baseline of the same selection must use.
int train_seq_len(const std::string& dir) {
  const auto j = nlohmann::json::parse(read_text(dir + "/summary.json"), nullptr, false);
  if (j.is_object() && j.contains("data") && j["data"].is_object() && j["data"].contains("seq_len") &&
      j["data"]["seq_len"].is_number_integer())
    return j["data"]["seq_len"].get<int>();
  return 0;
}

// A stage's plan run: each command to its log; the first whose status is above its ok_up_to ends
// the stage. A command logging elsewhere (decide's baseline) that fails is named in the stage's own
// log, so that the stage's log always says why the stage failed.
int run_plan(const Stage& st, const StagePlan& plan) {
  int status = 0;
  for (const StageCommand& c : plan.commands) {
    status = run_child(c.argv, c.log);
    if (status > c.ok_up_to) {
      if (c.log != log_of(st))
        write_text(log_of(st), c.argv[0] + " " + c.argv[1] + " failed (exit " + std::to_string(status) + "): " + c.log +
                                   "\n" + tail(read_text(c.log), 4) + "\n");
      return status;
    }
  }
  return status;
}

// prep: data-prep's output is its JSON summary alone (--progress-interval 0), the monitor's
// --data-prep evidence.
int write_prep_evidence(const Stage& st) {
  const auto j = nlohmann::json::parse(read_text(log_of(st)), nullptr, false);
  if (j.is_discarded()) {
    write_text(log_of(st), "\nprep.log is not data-prep's JSON summary: see the lines above\n", std::ios::app);
    return static_cast<int>(ExitCode::kFailure);
  }
  write_text(st.run_dir + "/" + run_evidence::kDataPrep, j.dump(2) + "\n");
  return 0;
}

// Every cycle folder, empty, with its evidence/ (a rerun into the same WORK starts its cycles over;
// the registry, when it is under WORK, stays).
void prepare_folders(const CyclesSettings& s) {
  for (int k = 1; k <= int(s.snapshots.size()); ++k) {
    std::error_code ec;
    fs::remove_all(s.cycle_dir(k), ec);
    fs::create_directories(fs::path(s.cycle_dir(k) + "/" + run_evidence::kDataPrep).parent_path(), ec);
    if (ec) throw IoError(s.cycle_dir(k) + ": cannot create the folder (" + ec.message() + ")");
  }
}

// The failure of a stage, said: its log named, its last lines on stderr.
void say_failed(const Stage& st, int status) {
  const CycleStageName n = parse_cycle_stage_name(st.name);
  say(n, n.step + " failed (exit " + std::to_string(status) + "): " + log_of(st));
  std::cerr << tail(read_text(log_of(st)), 5) << std::endl;
}

// What the stage records of a Slurm run say about `st`: its status, -1 when it left no record (it
// never ran, or its job ended before it could write one), -2 when it was skipped.
int recorded_status(const Stage& st) {
  const CycleStageName n = parse_cycle_stage_name(st.name);
  int status = -1;
  for (const StageRecord& r : read_stage_records(st.run_dir + "/stages.jsonl"))
    if (r.stage == n.step) status = r.exit_status;
  if (status == -1 && read_text(log_of(st)).rfind("skipped: ", 0) == 0) status = -2;
  return status;
}

int run_local(const CyclesSettings& s, const StageGraph& g) {
  prepare_folders(s);
  int rc = 0;
  for (const Stage& st : g.stages) {
    if (st.after_all) continue;
    const int status = run_cycle_stage(s, st);
    if (status > st.ok_up_to) {
      say_failed(st, status);
      rc = 1;
      break;
    }
    say_lines(s, st);
  }
  // The pattern's cost table whatever happened (the cycles that ran), printed.
  for (const Stage& st : g.stages)
    if (st.after_all) {
      const int status = run_cycle_stage(s, st);
      std::cout << read_text(log_of(st)) << std::flush;
      if (status != 0) {
        say_failed(st, status);
        rc = 1;
      }
    }
  return rc;
}

int run_slurm(const CyclesSettings& s, const StageGraph& g, const std::string& self,
              const std::vector<std::string>& self_args) {
  if (find_on_path("sbatch").empty()) throw UsageError("--slurm: sbatch not found (run on a Slurm login node)");
  // The wait for the chain asks scontrol: without it the jobs would run unwatched.
  if (find_on_path("scontrol").empty()) throw UsageError("--slurm: scontrol not found (run on a Slurm login node)");
  const std::string hint = "change --np or --sbatch";
  slurm::require_job_shape("1-task", with_tasks(1, s.sbatch), hint);
  slurm::require_job_shape("training (" + std::to_string(s.np) + " ranks)", with_tasks(s.np, s.sbatch), hint);
  prepare_folders(s);
  const std::string wrap = shell_command(self, self_args);
  const auto submitted = submit_graph(g, [&](const Stage& st, const std::string& dependency) {
    const CycleStageName n = parse_cycle_stage_name(st.name);
    std::string job_name = "cycles-total";
    if (n.cycle > 0) job_name = "cycle-" + std::to_string(n.cycle) + "-" + n.step;
    std::vector<std::string> argv =
        slurm::chain_job_argv(s.sbatch, job_name, st.run_dir + "/slurm-" + n.step + "-%j.out", st.ranks, dependency);
    argv.insert(argv.end(), {"--wrap", wrap + " --stage " + shell_quote(st.name)});
    return argv;
  });
  // The job ids: each cycle's in its jobs.txt (release-gate costs reads them: "STEP ID"), every
  // one in WORK/jobs.txt (to follow or cancel the pattern).
  std::map<std::string, std::vector<slurm::ListedJob>> per_dir;
  std::string line;
  std::vector<std::string> ids;
  const std::map<std::string, const Stage*> by_name = [&] {
    std::map<std::string, const Stage*> m;
    for (const Stage& st : g.stages) m[st.name] = &st;
    return m;
  }();
  for (const auto& job : submitted) {
    const Stage& st = *by_name.at(job.stage);
    if (!st.after_all) per_dir[st.run_dir].push_back({parse_cycle_stage_name(job.stage).step, job.job_id});
    ids.push_back(job.job_id);
    line += (line.empty() ? " " : ", ") + job.stage + " " + job.job_id;
  }
  for (const auto& [dir, jobs] : per_dir) slurm::write_job_list(dir + "/jobs.txt", jobs);
  slurm::write_job_list(s.work + "/jobs.txt", submitted);
  const std::vector<std::string> bad = slurm::cancel_if_never_starting(ids, pending_check_s());
  if (!bad.empty()) {
    std::cerr << slurm::never_starting_message("pipeline cycles", bad) << std::endl;
    return static_cast<int>(ExitCode::kUsage);
  }
  say({}, "submitted:" + line);
  say({}, "job ids: " + s.work + "/jobs.txt; waiting for the last one (the pattern's cost table)");
  // The total runs after every other job, whatever their outcome: when it has ended, all have.
  const std::string total = submitted.back().job_id;
  while (!slurm::job_has_ended(total)) std::this_thread::sleep_for(std::chrono::seconds(2));
  // What each stage's job left, in graph order, told as --local tells it; then the pattern's table.
  int rc = 0;
  for (const Stage& st : g.stages) {
    if (st.after_all || rc != 0) continue;
    const int status = recorded_status(st);
    const CycleStageName n = parse_cycle_stage_name(st.name);
    if (status == -1) {
      say(n, n.step + " did not run to its end (its job's output: " + st.run_dir + "/slurm-" + n.step + "-*.out)");
      rc = 1;
    } else if (status > st.ok_up_to) {
      say_failed(st, status);
      rc = 1;
    } else {
      say_lines(s, st);
    }
  }
  for (const Stage& st : g.stages)
    if (st.after_all) {
      const int status = recorded_status(st);
      if (status == 0) {
        std::cout << read_text(log_of(st)) << std::flush;
      } else {
        say({}, "the pattern's cost table failed (exit " + std::to_string(status) + "): " + log_of(st));
        rc = 1;
      }
    }
  return rc;
}

}  // namespace

InService read_in_service(const std::string& registry) {
  const std::string path = registry + "/last-known-good";
  if (!fs::exists(path)) return {};
  return in_service_from_pointer(read_text(path), path);
}

int run_cycle_stage(const CyclesSettings& s, const Stage& st) {
  const CycleStageName n = parse_cycle_stage_name(st.name);
  StageRecord r;
  r.stage = n.step;
  r.ranks = st.ranks;
  r.start = unix_now();
  try {
    const StagePlan plan =
        plan_cycle_stage(s, st, read_in_service(s.registry), n.step == "decide" ? train_seq_len(st.run_dir) : 0);
    if (!plan.skipped.empty()) {  // said in its log, not timed (nothing ran)
      write_text(log_of(st), "skipped: " + plan.skipped + "\n");
      return 0;
    }
    r.exit_status = run_plan(st, plan);
    if (r.exit_status == 0 && n.step == "prep") r.exit_status = write_prep_evidence(st);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // a tool not found, a pointer not readable: the stage failed, said why
    write_text(log_of(st), std::string(e.what()) + "\n", std::ios::app);
    r.exit_status = static_cast<int>(e.code());
  }
  r.end = unix_now();
  if (const char* job = std::getenv("SLURM_JOB_ID")) r.job_id = job;
  append_stage_record(st.run_dir + "/stages.jsonl", r);
  return r.exit_status;
}

int run_cycles(const CyclesSettings& s, const std::string& self, const std::vector<std::string>& self_args) {
  // The stages start mpirun as whoever runs this (root in a container) on however many cores.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  const StageGraph g = build_cycles_graph(s);
  if (!s.stage.empty()) {
    const Stage& st = stage_named(g, s.stage);
    const int status = run_cycle_stage(s, st);
    if (status <= st.ok_up_to) say_lines(s, st);
    else say_failed(st, status);
    return status <= st.ok_up_to ? 0 : status;
  }
  if (s.slurm) return run_slurm(s, g, self, self_args);
  return run_local(s, g);
}

int run_cycles_command(CyclesArgs args, const std::string& self, const std::vector<std::string>& self_args) {
  const std::string exe_dir = fs::path(self).parent_path().string();
  if (args.bin.empty()) args.bin = exe_dir;
  args.home = find_home(args.home, exe_dir);
  return run_cycles(validate_cycles(args, fs::current_path().string()), self, self_args);
}

}  // namespace shardtrain::pipeline
