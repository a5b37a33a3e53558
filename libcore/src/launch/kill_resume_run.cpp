// The kill-and-resume proof's run (kill_resume_proof.hpp): the data, the uninterrupted reference,
// the resilient run with its killer thread, the comparison and the report.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/equiv/equivalence.hpp"
#include "shardtrain/launch/kill_resume_proof.hpp"
#include "shardtrain/launch/restart_log.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain::launch {
namespace {

namespace fs = std::filesystem;


void say(const std::string& line) { std::cout << "kill-resume-proof: " << line << std::endl; }

std::string step_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::optional<std::string> read_latest(const std::string& ckpt_dir) {
  std::ifstream in(ckpt_dir + "/latest");
  std::string line;
  if (!std::getline(in, line) || line.empty()) return std::nullopt;
  return fs::path(line).filename().string();
}

// The last record a rank wrote to its step log (the highest line), if any.
std::optional<StepLogEntry> last_record(const std::string& run_dir, int rank) {
  const std::string path = run_dir + "/steps.rank" + std::to_string(rank) + ".jsonl";
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    const StepLogContents log = read_step_log(path);
    const StepLogEntry* last = nullptr;
    for (const auto& e : log.steps)
      if (!last || e.line > last->line) last = &e;
    if (last) return *last;
  } catch (const Error&) {
  }
  return std::nullopt;
}

double mtime_of(const fs::path& p) {
  struct stat st {};
  if (stat(p.c_str(), &st) != 0) return 0;
  return double(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
}

// A step_*.tmp folder written during this attempt (one left by an earlier kill is stale).
std::optional<std::string> fresh_tmp(const std::string& ckpt_dir, double since) {
  std::vector<fs::path> tmps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step_", 0) == 0 && e.path().extension() == ".tmp") tmps.push_back(e.path());
  }
  std::sort(tmps.rbegin(), tmps.rend());
  for (const auto& t : tmps)
    if (mtime_of(t) > since) return t.stem().string();
  return std::nullopt;
}

// The killer: watches the launcher's attempt logs (RUN/attemptN.log appears just before attempt N
// launches, after N-1 exited), the step logs and the checkpoint folder, and SIGKILLs one rank per
// planned kill, each in its own attempt: a step record written after attempt N's log appeared
// belongs to attempt N. After each kill it waits for the next attempt (or the run's end) and
// records whether a mid-write kill really interrupted the write.
class Killer {
 public:
  Killer(std::string run_dir, std::vector<PlannedKill> plan, std::string capacity_file, std::string log_path)
      : run_(std::move(run_dir)), ckpt_(run_ + "/checkpoints"), plan_(std::move(plan)),
        capacity_file_(std::move(capacity_file)), log_(log_path) {}

  void start() { thread_ = std::thread([this] { run(); }); }
  void finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  const std::vector<FiredKill>& fired() const { return fired_; }

 private:
  int attempt() {
    while (fs::exists(run_ + "/attempt" + std::to_string(seen_.size()) + ".log")) seen_.push_back(unix_now());
    return int(seen_.size()) - 1;
  }
  void note(const std::string& line) { log_ << line << std::endl; }

  void run() {
    // A loaded machine: a generous bound, only against a hung run.
    const double deadline = unix_now() + 120 + 60 * double(plan_.size());
    int killed_attempt = -1;
    for (std::size_t i = 0; i < plan_.size(); ++i) {
      const PlannedKill& p = plan_[i];
      std::optional<FiredKill> made;
      while (!made && unix_now() < deadline && !done_) {
        const int now_attempt = attempt();
        std::optional<StepLogEntry> rec;
        if (now_attempt > killed_attempt) rec = last_record(run_, p.rank);
        if (rec && rec->written_at > seen_[std::size_t(now_attempt)] && rec->record.step + 1 >= p.step &&
            kill_able(rec->pid)) {
          std::optional<std::string> tmp;
          if (p.mode == KillMode::kDuringSave) {
            tmp = fresh_tmp(ckpt_, seen_[std::size_t(now_attempt)]);
            if (!tmp) {
              std::this_thread::sleep_for(std::chrono::microseconds(500));
              continue;
            }
          }
          FiredKill k;
          k.index = int(i) + 1;
          k.rank = p.rank;
          k.pid = rec->pid;
          k.attempt = now_attempt;
          k.mode = p.mode;
          k.planned_step = p.step;
          k.after_step = rec->record.step + 1;
          k.lost = p.capacity;
          k.latest_at_kill = read_latest(ckpt_);
          k.interrupted = tmp;
          if (p.capacity) write_file_atomically(capacity_file_, std::to_string(*p.capacity) + "\n");
          ::kill(pid_t(rec->pid), SIGKILL);
          note("kill " + std::to_string(k.index) + ": rank " + std::to_string(p.rank) + " pid " + std::to_string(k.pid) +
               " in attempt " + std::to_string(now_attempt) +
               (tmp ? " during the write of " + *tmp + ".tmp" : " after step " + std::to_string(k.after_step)) +
               (p.capacity ? "; node lost: capacity now " + std::to_string(*p.capacity) + " ranks" : ""));
          killed_attempt = now_attempt;
          made = k;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      }
      if (!made) {
        note("kill " + std::to_string(i + 1) + " (rank " + std::to_string(p.rank) + " at step " + std::to_string(p.step) +
             ", " + kill_mode_name(p.mode) + ") never fired: " + (done_ ? "the run ended first" : "timed out waiting for it"));
        break;
      }
      // Wait until the killed attempt is over (the next one's log, or the run's end) to see
      // whether the write it was in committed anyway (the killed rank had done its part).
      while (attempt() <= killed_attempt && !done_ && unix_now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (made->interrupted) {
        made->write_committed = fs::is_directory(ckpt_ + "/" + *made->interrupted);
        note("  the write of " + *made->interrupted + ": " + (*made->write_committed ? "committed anyway" : "write interrupted") +
             "; `latest` named " + made->latest_at_kill.value_or("None") + " at the kill");
      }
      fired_.push_back(*made);
    }
    note("killer done");
  }
  static bool kill_able(std::int64_t pid) { return pid > 0 && fs::exists("/proc/" + std::to_string(pid)); }

  std::string run_, ckpt_;
  std::vector<PlannedKill> plan_;
  std::string capacity_file_;
  std::ofstream log_;
  std::vector<double> seen_;  // seen_[N]: when attempt N's log was first seen
  std::vector<FiredKill> fired_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// attempt -> the checkpoint its first step record says it resumed from (rank 0's step log, every
// record in file order), for each restart of the log: the first record written between its
// relaunch and the next one's.
std::vector<std::pair<int, std::string>> resumed_checkpoints(const std::string& run_dir, const RestartLog& log) {
  std::vector<std::pair<int, std::string>> out;
  std::vector<StepLogEntry> steps;
  try {
    steps = read_step_log(run_dir + "/steps.rank0.jsonl", Repeats::kKeepAll).steps;
  } catch (const Error&) {
    return out;
  }
  for (std::size_t i = 0; i < log.restarts.size(); ++i) {
    const double from = log.restarts[i].relaunch_time;
    const double to = i + 1 < log.restarts.size() ? log.restarts[i + 1].relaunch_time : 1e300;
    for (const auto& e : steps)
      if (e.written_at > from && e.written_at < to) {
        if (!e.checkpoint_id.empty()) out.emplace_back(log.restarts[i].attempt, e.checkpoint_id);
        break;
      }
  }
  return out;
}


// A temporary work folder removed when the proof ends (unless the user named one).
class WorkDir {
 public:
  explicit WorkDir(const std::string& given) {
    if (!given.empty()) {
      path_ = given;
      return;
    }
    std::string templ = (fs::temp_directory_path() / "kill-resume-proof.XXXXXX").string();
    if (!mkdtemp(templ.data())) throw IoError("cannot make a temporary folder under " + fs::temp_directory_path().string());
    path_ = templ;
    owned_ = true;
  }
  ~WorkDir() {
    std::error_code ec;
    if (owned_) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

std::string tail_lines(const std::string& path, std::size_t n, const std::string& prefix) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += prefix + lines[i] + "\n";
  return out;
}

std::string seconds2(std::optional<double> s) {
  if (!s) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", *s);
  return buf;
}

// The training command with each step paced to at least `ms` (see ProofOptions::pace_ms).
std::vector<std::string> paced(std::vector<std::string> argv, int ms) {
  if (ms > 0) argv.insert(argv.end(), {"--inject", "delay:rank=0,ms=" + std::to_string(ms) + ",phase=data"});
  return argv;
}

std::vector<std::string> with_run_dir(std::vector<std::string> argv, const std::string& dir) {
  argv.insert(argv.end(), {"--run-dir", dir});
  return argv;
}

// The plan from --plan FILE, or drawn from the shape's seed; `origin` says which.
std::vector<PlannedKill> kill_plan(const ProofOptions& o, std::string& origin) {
  const KillPlanShape& shape = o.shape;
  std::vector<PlannedKill> plan;
  if (!o.plan_file.empty()) {
    std::ifstream in(o.plan_file);
    if (!in) throw UsageError("--plan " + o.plan_file + ": no such readable file");
    std::ostringstream text;
    text << in.rdbuf();
    plan = parse_kill_plan(text.str(), "--plan " + o.plan_file);
    origin = "from " + o.plan_file;
  } else {
    plan = draw_kill_plan(shape);
    origin = "seed " + std::to_string(shape.seed);
  }
  return plan;
}

void check_tools(const std::string& bin_dir) {
  for (const char* tool : {"ddp-train", "data-prep", "run-resilient"})
    if (access((bin_dir + "/" + tool).c_str(), X_OK) != 0)
      throw UsageError(bin_dir + "/" + tool + " not found: build first (scripts/setup.sh), or give --bin DIR");
}

// What the verdict knows before the run: the shape and the plan.
ProofRun planned_run(const KillPlanShape& shape, const std::vector<PlannedKill>& plan, const std::string& origin) {
  ProofRun run;
  run.world = shape.world;
  run.steps = shape.steps;
  run.kills = int(plan.size());
  run.origin = origin;
  for (const auto& k : plan) {
    run.save_kills += k.mode == KillMode::kDuringSave;
    if (k.capacity) run.shrink.push_back(*k.capacity);
  }
  run.final_checkpoint = step_name(shape.steps);
  return run;
}

// The model's shape arguments to ddp-train (a named model, or the small default).
std::vector<std::string> model_args(const ProofOptions& o) {
  if (!o.model.empty()) return {"--model", o.model, "--threads", "1"};
  return {"--seq-len", "32", "--d-model", std::to_string(o.d_model), "--layers", "2", "--heads", "2"};
}

// WORK/markov.h5, the corpus both runs train on.
void prepare_data(const ProofOptions& o, const std::string& work) {
  std::vector<std::string> data_prep = {o.bin_dir + "/data-prep", "--synthetic", "markov", "--documents", "20",
                                        "--doc-tokens", "4000", "-o", work + "/markov.h5"};
  if (!o.model.empty())  // a corpus over the whole vocabulary, so every embedding row can be touched
    data_prep.insert(data_prep.end(), {"--symbols", std::to_string(model_preset(o.model).vocab - 1)});
  if (run_child(data_prep, work + "/data-prep.log") != 0)
    throw IoError("data-prep failed (" + work + "/data-prep.log)");
}

// The training command both runs share (each adds its own --run-dir).
std::vector<std::string> training_command(const ProofOptions& o, const std::string& work) {
  const KillPlanShape& shape = o.shape;
  std::vector<std::string> train_unpaced = {"mpirun", "-np", std::to_string(shape.world), "--oversubscribe",
                                            o.bin_dir + "/ddp-train", "--data", work + "/markov.h5"};
  const std::vector<std::string> shape_args = model_args(o);
  train_unpaced.insert(train_unpaced.end(), shape_args.begin(), shape_args.end());
  train_unpaced.insert(train_unpaced.end(),
                       {"--global-batch", std::to_string(shape.global_batch), "--micro-batch", "1", "--steps",
                        std::to_string(shape.steps), "--deterministic", "--ckpt-every", std::to_string(o.ckpt_every),
                        "--keep", "100", "--peak-gflops", "100", "--log-every", "1000"});
  return paced(train_unpaced, o.pace_ms);
}

// The uninterrupted run (WORK/ref); false, with its log's tail said, when it failed.
bool run_reference(const std::vector<std::string>& train, const KillPlanShape& shape, const std::string& work) {
  say("reference: " + std::to_string(shape.steps) + " steps uninterrupted on " + std::to_string(shape.world) + " ranks");
  if (run_child(with_run_dir(train, work + "/ref"), work + "/ref.log") != 0) {
    std::cout << tail_lines(work + "/ref.log", 30, "");
    std::cerr << "FAIL: the reference run failed" << std::endl;
    return false;
  }
  return true;
}

// The same job under run-resilient (WORK/run) while the killer fires the plan; its exit status and
// the kills fired into `run`, the kills also in WORK/kills.jsonl.
void run_with_killer(const std::vector<std::string>& train, const std::vector<PlannedKill>& plan, const std::string& bin,
                     const std::string& work, ProofRun& run) {
  Killer killer(work + "/run", plan, work + "/capacity", work + "/killer.log");
  killer.start();
  say("resilient run: the same job under run-resilient");
  // No backoff: with many kills the launcher's exponential backoff (for crash loops) would reach
  // its cap; the restart times it records exclude the backoff anyway.
  std::vector<std::string> launcher = {bin + "/run-resilient", "--max-restarts", std::to_string(run.kills + 2),
                                       "--backoff", "0", "--log", work + "/restarts.json"};
  if (!run.shrink.empty())
    launcher.insert(launcher.end(), {"--min-ranks", "1", "--capacity-cmd", "cat " + work + "/capacity",
                                     "--rank-failures", "1000"});
  launcher.push_back("--");
  for (const auto& a : with_run_dir(train, work + "/run")) launcher.push_back(a);
  run.run_status = run_child(launcher, work + "/run.log");
  killer.finish();
  run.fired = killer.fired();
  std::ofstream kills(work + "/kills.jsonl");
  for (const auto& k : run.fired) kills << k.to_json().dump() << "\n";
}

// The resilient run's final checkpoint against the reference's, into run.equiv_verdict.
void compare_final(const std::string& work, ProofRun& run) {
  equiv::EquivOptions eo;
  eo.a = work + "/run/checkpoints/" + run.final_checkpoint + "/index.h5";
  eo.b = work + "/ref/checkpoints/" + run.final_checkpoint + "/index.h5";
  eo.kind = equiv::InputKind::kParams;
  eo.group_a = eo.group_b = "tensors";
  try {
    const equiv::EquivReport report = equiv::compare_files(eo);
    run.equiv_verdict = equiv::verdict_name(report.verdict);
    run.tensors_compared = report.tensors.size();
    if (report.verdict != equiv::Verdict::kBitwise) std::cout << report.table();
  } catch (const Error& e) {
    std::cout << "  equiv: " << e.what() << std::endl;
  }
}

// The launcher's restart log and the checkpoint each restart resumed from, each restart said.
void read_restarts(const std::string& work, ProofRun& run) {
  try {
    run.restarts = read_restart_log(work + "/restarts.json");
  } catch (const Error& e) {
    std::cout << "  the restart log: " << e.what() << std::endl;
  }
  run.resumed_with = resumed_checkpoints(work + "/run", run.restarts);
  for (const auto& r : run.restarts.restarts)
    std::cout << "  restart " << r.attempt << ": previous exit " << r.previous_exit_status << ", failed rank "
              << (r.failed_rank ? std::to_string(*r.failed_rank) : "None") << ", resumed from "
              << r.resumed_from.value_or("None") << ", restart time " << seconds2(r.restart_s())
              << (r.world ? ", W " + std::to_string(r.world->previous_world_size) + " -> " + std::to_string(r.world->world_size)
                          : "")
              << std::endl;
}

// The verdict said; the exit status, and the report where the proof holds.
int conclude(const ProofOptions& o, const ProofRun& run) {
  const ProofVerdict verdict = judge_proof(run);
  std::cout << verdict.text(run) << std::flush;
  if (!verdict.invariant_holds()) {
    std::cerr << "FAIL (progress lost): " << verdict.lost.front() << std::endl;
    return 1;
  }
  if (!verdict.holds()) {
    std::cerr << "FAIL (harness inconsistency, nothing lost: the invariant holds): " << verdict.harness.front() << std::endl;
    return 1;
  }
  if (!o.report.empty())
    write_json_file(o.report, {{"proof", "holds"},
                               {"verdict", "BITWISE"},
                               {"np", o.shape.world},
                               {"steps", o.shape.steps},
                               {"kills", run.kills},
                               {"seed", o.shape.seed},
                               {"restarts", run.restarts.restarts.size()},
                               {"final", run.final_checkpoint},
                               {"created", now_rfc3339()},
                               {"by", "kill-resume-proof"}});
  return 0;
}

}  // namespace

int run_kill_resume_proof(const ProofOptions& o) {
  const KillPlanShape& shape = o.shape;
  std::string origin;
  const std::vector<PlannedKill> plan = kill_plan(o, origin);
  check_kill_plan(plan, shape.world, shape.steps, shape.global_batch);
  std::error_code ec;
  if (!o.report.empty()) fs::remove(o.report, ec);  // a failed proof never leaves a pass behind
  check_tools(o.bin_dir);
  ProofRun run = planned_run(shape, plan, origin);

  const WorkDir work_dir(o.work_dir);
  const std::string work = work_dir.path();
  fs::remove_all(work, ec);
  fs::create_directories(work);
  prepare_data(o, work);
  const std::vector<std::string> train = training_command(o, work);
  if (!run_reference(train, shape, work)) return 1;
  say("kill plan (" + origin + "): " + describe_kill_plan(plan));
  say("one kill per attempt: after a kill the killer waits for the next attempt's first step before it fires again");
  write_file_atomically(work + "/capacity", std::to_string(shape.world) + "\n");
  run_with_killer(train, plan, o.bin_dir, work, run);
  std::cout << tail_lines(work + "/killer.log", 1000, "  ");
  if (run.run_status != 0) std::cout << tail_lines(work + "/run.log", 20, "  run.log: ");

  if (run.run_status == 0) compare_final(work, run);
  read_restarts(work, run);
  return conclude(o, run);
}

}  // namespace shardtrain::launch
