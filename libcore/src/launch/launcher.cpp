// The resilient launcher's loop (launcher.hpp): processes, files, signals and clocks around the
// pure policy of restart_policy.hpp.
#include "shardtrain/launch/launcher.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/base/host.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/launch/attempt_verdict.hpp"
#include "shardtrain/launch/attempt_watch.hpp"
#include "shardtrain/launch/host_probe.hpp"
#include "shardtrain/launch/launcher_metrics.hpp"
#include "shardtrain/launch/restart_log.hpp"
#include "shardtrain/slurm/allocation.hpp"
#include "shardtrain/slurm/job_control.hpp"
#include "shardtrain/slurm/queue.hpp"
#include "shardtrain/telemetry/metrics_endpoint.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"
#include "shardtrain/telemetry/scrape_targets.hpp"

#include "run_folder.hpp"

namespace shardtrain::launch {
namespace {

namespace fs = std::filesystem;

// Signals, as the handlers see them: SIGUSR1 is a request to stop restarting; SIGTERM and SIGINT
// go on to the running attempt (the batch system or a user stopping the whole job) and end the
// launcher after it.
std::atomic<bool> g_stop_requested{false};
std::atomic<int> g_terminating{0};
std::atomic<int> g_child{-1};

extern "C" void on_usr1(int) { g_stop_requested = true; }
extern "C" void on_terminate(int sig) {
  g_terminating = sig;
  const int child = g_child.load();
  if (child > 0) kill(child, sig);
}

void install_handlers() {
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, nullptr);
  sa.sa_handler = on_terminate;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

void say(const std::string& line) { std::cerr << "run-resilient: " << line << std::endl; }

using detail::first_step_after;
using detail::last_message;
using detail::move_flight_records;
using detail::read_latest;
using detail::read_whole;

std::optional<int> capacity_now(const LauncherOptions& options) {
  if (options.slurm_batch) {
    try {
      return slurm::live_ranks_now(options.slurm_batch->time_limit.job_id);
    } catch (const Error& e) {
      say(std::string("the allocation's live ranks are unknown (") + e.what() + "); keeping the first launch's");
      return std::nullopt;
    }
  }
  const std::string& capacity_cmd = options.capacity_cmd;
  if (capacity_cmd.empty()) return std::nullopt;
  const ChildOutput out = run_child_captured({"/bin/bash", "-c", capacity_cmd});
  std::istringstream in(out.out);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  last.erase(std::remove_if(last.begin(), last.end(), [](unsigned char c) { return std::isspace(c); }), last.end());
  if (!last.empty() && std::all_of(last.begin(), last.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::stoi(last);
  say("--capacity-cmd printed '" + last + "', not a number of ranks; keeping the first launch's");
  return std::nullopt;
}

std::string join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// The time-limit stop's side effects (time_limit.hpp decides): the ranks asked to checkpoint.
void ask_ranks_to_checkpoint(const LauncherOptions::SlurmBatch& batch) {
  if (batch.ranks_via_srun) {
    try {
      slurm::signal_job_steps(batch.time_limit.job_id, "USR1");
    } catch (const Error& e) {
      say(e.what());
    }
    return;
  }
  const int child = g_child.load();
  if (child > 0) kill(child, SIGUSR1);  // mpirun forwards it to every rank
}

// Sleeps `s` seconds, waking early for SIGUSR1 or a termination signal.
void interruptible_sleep(double s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(s);
  while (std::chrono::steady_clock::now() < until && !g_stop_requested && !g_terminating)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void wait_for_node_release(const std::string& host);

// After a node-lost verdict: the host joins `lost`, and `live` becomes every other host of the
// job's rank -> host table with the ranks it held (where mpirun may place the next attempt).
void note_lost_host(const std::string& run_dir, const std::string& host, const char* how, std::vector<std::string>& lost,
                    std::map<std::string, int>& live) {
  if (host.empty() || std::find(lost.begin(), lost.end(), host) != lost.end()) return;
  lost.push_back(host);
  try {
    const RankHosts placement = read_rank_hosts(run_dir);
    live.clear();
    for (const auto& [h, ranks] : placement.ranks_by_host())
      if (std::find(lost.begin(), lost.end(), h) == lost.end()) live[h] = int(ranks.size());
  } catch (const Error& e) {
    say(std::string("the rank hosts table is unreadable (") + e.what() + "): the next attempt is not placed");
  }
  say("node " + host + " " + how + ": the next attempts stay off it");
  wait_for_node_release(host);
}

// Rule 2c of attempt_verdict.hpp: a job across hosts whose attempt failed for anything but a lost
// node gets its hosts probed (slurmd's port inside a Slurm job; nothing to probe elsewhere), so a
// partitioned node is named rather than the healthy rank that timed out waiting for it first.
constexpr double kProbeTimeoutS = 0.25;  // a node on the job's network answers in well under a millisecond (the kernel completes the connect)
// The hosts come from the attempt's own table (attempt_placement: a launch that failed before its
// ranks started leaves the previous job's, whose lost node would be blamed, and excluded, again).
AttemptVerdict probe_for_partition(AttemptVerdict v, const AttemptEvidence& evidence) {
  if (v.verdict_class == VerdictClass::kNodeLost) return v;
  std::string ignored;  // judge_attempt has said why a table is unreadable
  const std::optional<RankHosts> placement = attempt_placement(evidence, evidence.world_size, ignored);
  if (!placement) return v;
  std::vector<std::string> hosts, unreachable;
  for (const auto& [host, ranks] : placement->ranks_by_host()) hosts.push_back(host);
  if (hosts.size() < 2) return v;
  const std::optional<int> port = slurm::slurmd_port();
  if (!port) return v;
  for (const HostProbe& p : probe_hosts(hosts, *port, kProbeTimeoutS)) {
    if (p.reach == Reachability::kUnreachable) unreachable.push_back(p.host);
    if (p.reach != Reachability::kReachable)
      say("probe of " + p.host + ":" + std::to_string(*port) + ": " + p.detail);
  }
  return with_unreachable_host(std::move(v), *placement, unreachable, ranks_with_records(evidence.run_dir));
}

// Inside a Slurm allocation, a lost node stays in the job's node list until Slurm marks it DOWN
// (SlurmdTimeout later; with --no-kill the job then shrinks), and until then a launch on the
// others fails too (mpirun: "An ORTE daemon has unexpectedly failed", srun: "Requested nodes are
// busy"): wait until the allocation no longer lists the host, for at most kReleaseWaitS.
constexpr double kReleaseWaitS = 180;
void wait_for_node_release(const std::string& host) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || host.empty()) return;  // outside Slurm; without squeue or scontrol live_nodes throws (below)
  const auto t0 = std::chrono::steady_clock::now();
  const auto until = t0 + std::chrono::duration<double>(kReleaseWaitS);
  bool said = false;
  while (std::chrono::steady_clock::now() < until && !g_terminating) {
    std::vector<std::string> hosts;
    try {
      hosts = slurm::live_nodes(job);
    } catch (const Error&) {
      return;  // Slurm cannot say: relaunch now rather than wait on nothing
    }
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) {
      if (said)
        say("Slurm dropped " + host + " from job " + job + " after " +
            seconds_text(std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())) + " s");
      return;
    }
    if (!said) say("waiting for Slurm to drop the lost node " + host + " from job " + job + " (it then marks it DOWN)");
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  say("Slurm still lists " + host + " in job " + std::string(job) + " after " + seconds_text(kReleaseWaitS) +
      " s: relaunching anyway");
}

// Inside a Slurm allocation, a new srun step waits ("Requested nodes are busy") while the failed
// step is still listed (its tasks on a lost node are not yet reaped): wait until Slurm lists no
// step of this job, for at most kStepWaitS, before relaunching.
constexpr double kStepWaitS = 60;
void wait_for_old_steps(const std::vector<std::string>& argv) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || argv.empty() || std::filesystem::path(argv[0]).filename() != "srun") return;
  const std::regex step(std::string("^") + job + "\\.[0-9]+$");
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kStepWaitS);
  bool said = false;
  while (std::chrono::steady_clock::now() < until && !g_terminating) {
    const slurm::QueueAnswer steps = slurm::job_steps(job);
    if (!steps.answered) return;  // Slurm cannot say (no squeue here): relaunch now
    bool listed = false;
    for (const std::string& line : steps.lines) listed |= std::regex_match(line, step);
    if (!listed) return;
    if (!said) say("waiting for Slurm to end the failed step of job " + std::string(job) + " before the relaunch");
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  say("Slurm still lists a step of job " + std::string(job) + " after " + seconds_text(kStepWaitS) + " s: relaunching anyway");
}

// The watch of a running attempt (attempt_watch.hpp): looks at the run folder's flight records
// every kWatchEveryS and says when the command has outlived its job's failure; what it saw is kept
// for the line the launcher prints.
constexpr double kWatchEveryS = 0.2;
// SIGTERM to SIGKILL when the watch ends a command: mpirun with a daemon on a cut-off node did not
// end on SIGTERM within a second (it forwards the signal through that daemon and waits), and its
// ranks have already failed, so there is nothing for it to save.
constexpr double kWatchKillAfterS = 0.25;
class AttemptWatch {
 public:
  AttemptWatch(std::string run_dir, int world, double launched) : run_dir_(std::move(run_dir)), launched_(launched) {
    in_.world_size = world;
  }
  bool operator()() {
    const double now = unix_now();
    if (now < next_look_) return false;
    next_look_ = now + kWatchEveryS;
    for (int rank : ranks_with_failure_records(run_dir_, launched_, in_.failure_seen)) in_.failure_seen[rank] = now;
    in_.now = now;
    decision_ = decide_watch(in_);
    return decision_.end;
  }
  // "" when the command was not ended by the watch.
  std::string ended_line(int attempt) const {
    if (!decision_.end) return "";
    std::string ranks;
    for (const auto& [rank, seen] : in_.failure_seen) ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", in_.now - *decision_.failed_at);
    return "attempt " + std::to_string(attempt) + ": the flight records of rank" + (in_.failure_seen.size() > 1 ? "s " : " ") +
           ranks + (decision_.complete ? " (every rank)" : "") + " show the job failed " + buf +
           " s ago and its command was still running: ended it";
  }

 private:
  std::string run_dir_;
  double launched_;
  double next_look_ = 0;
  WatchInput in_;
  WatchDecision decision_;
};

// The launcher's endpoint and its scrape target (RUN_DIR/prometheus-launcher-targets.json), or
// nothing without a metrics port. UsageError naming the address when it cannot bind: the
// launcher exits 2 before its first launch.
struct LauncherEndpoint {
  std::shared_ptr<LauncherMetrics> metrics;
  std::unique_ptr<MetricsEndpoint> endpoint;
};
std::optional<LauncherEndpoint> serve_launcher_metrics(const LauncherOptions& options, const std::string& run_dir) {
  if (options.metrics_port == 0) return std::nullopt;
  const std::string host = host_name();
  std::map<std::string, std::string> labels{{"run_dir", fs::weakly_canonical(run_dir).string()}, {"host", host}};
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job) labels["train_job"] = job;
  LauncherEndpoint out{std::make_shared<LauncherMetrics>(labels), nullptr};
  out.endpoint = std::make_unique<MetricsEndpoint>(options.metrics_bind, options.metrics_port, out.metrics);
  const std::string address = scrape_host_of(options.metrics_bind, host) + ":" + std::to_string(options.metrics_port);
  write_scrape_targets_file(launcher_scrape_targets_path(run_dir), {ScrapeTarget{address, labels}});
  say("metrics: the launcher serves /metrics from " + out.endpoint->address() + "; its scrape target in " +
      launcher_scrape_targets_path(run_dir));
  return out;
}

// After the last attempt of a batch job warned of its time limit: done, or requeued (the restart
// log is written by then). A warning that came between attempts begins the stop here.
int finish_time_limit(TimeLimitStop& stop, const LauncherOptions& options, const ChildCommand& command) {
  if (!stop.begun()) say(stop.begin(unix_now(), read_latest(command.ckpt_dir())));
  const TimeLimitStop::Ending ending = stop.finish(unix_now(), read_latest(command.ckpt_dir()));
  for (const auto& line : ending.lines) say(line);
  if (!ending.requeue) return 0;
  try {
    slurm::requeue_job(options.slurm_batch->time_limit.job_id);
  } catch (const Error& e) {
    say(e.what());
    return 1;
  }
  return 0;
}

RestartPolicy policy_for(const LauncherOptions& options, const ChildCommand& command) {
  RestartPolicy policy = options.policy;
  policy.launch_world = command.rank_count().value_or(0);
  policy.micro_batches = command.global_batch() ? *command.global_batch() / command.micro_batch() : 0;
  policy.exclude_hosts = !options.exclude_cmd.empty();
  return policy;
}

// One attempt as the launcher ran it (its exit status: ResilientRun::status_).
struct AttemptRun {
  std::string resumed_from;  // `latest` when it was launched
  double launched = 0;
  double ended = 0;
  std::string output_path;  // RUN_DIR/attemptN.log
};

// The launcher's loop: what it carries from one attempt to the next (the policy's state, the lost
// hosts, the previous attempt's verdict and world size) and the restart log it writes at the end.
class ResilientRun {
 public:
  ResilientRun(const LauncherOptions& options, const ChildCommand& command, std::string run_dir,
               LauncherMetrics* metrics)
      : options_(options), command_(command), policy_(policy_for(options, command)), run_dir_(std::move(run_dir)),
        log_path_(options.log_path.empty() ? run_dir_ + "/restarts.json" : options.log_path), metrics_(metrics) {
    if (options.slurm_batch) time_limit_.emplace(options.slurm_batch->time_limit);
    state_.world = command.rank_count().value_or(0);
    previous_world_ = state_.world;
  }

  // Attempts until one finishes, the policy stops, or a stop is requested.
  void run_attempts() {
    for (state_.attempt = 0;; ++state_.attempt) {
      const AttemptRun attempt = run_attempt();
      if (state_.attempt > 0) log_restart(attempt);
      const AttemptOutcome outcome = outcome_of(attempt);
      if (!restart(decide_after_attempt(policy_, state_, outcome), attempt)) return;
    }
  }

  // The restart log written; the launcher's exit status.
  int finish() {
    log_.final_exit_status = status_;
    if (status_ != 0 && status_ != 2 && previous_verdict_) log_.final_verdict = previous_verdict_;
    write_restart_log(log_path_, log_);
    if (time_limit_ && g_stop_requested && !g_terminating) return finish_time_limit(*time_limit_, options_, command_);
    if (g_terminating && status_ == 0) return 128 + g_terminating;
    return status_;
  }

 private:
  AttemptRun run_attempt() {
    const std::vector<std::string> argv = ChildCommand::on_hosts(
        command_.for_attempt(state_.attempt, command_.rank_count() ? std::optional<int>(state_.world) : std::nullopt),
        live_slots_, lost_hosts_, std::getenv("SLURM_JOB_ID") != nullptr);
    if (state_.attempt > 0) wait_for_old_steps(argv);
    AttemptRun a;
    a.resumed_from = read_latest(command_.ckpt_dir());
    a.launched = unix_now();
    a.output_path = run_dir_ + "/attempt" + std::to_string(state_.attempt) + ".log";
    say("attempt " + std::to_string(state_.attempt) + ": " + join(argv));
    AttemptWatch watch(run_dir_, state_.world, a.launched);
    if (metrics_) metrics_->attempt_started(state_.attempt, state_.world);
    // Only mpirun outlives its ranks' failure (it waits for a daemon on a cut-off node); srun ends
    // with its tasks, and its own report of a lost node is what names the node: ending it early
    // would cut that report off.
    const bool watched = !argv.empty() && fs::path(argv.front()).filename() != "srun";
    const auto should_end = [&] { return time_limit_ends_attempt() || (watched && watch()); };
    status_ = run_child_teed(
        argv, a.output_path, [](int pid) { g_child = pid; }, 0.5, should_end, kWatchKillAfterS);
    a.ended = unix_now();
    if (metrics_) metrics_->attempt_ended(status_);
    if (const std::string line = watch.ended_line(state_.attempt); !line.empty()) say(line);
    return a;
  }

  // The time-limit stop (time_limit.hpp decides), polled while an attempt runs once SIGUSR1 came:
  // true when it ends the attempt.
  bool time_limit_ends_attempt() {
    if (!time_limit_ || !g_stop_requested) return false;
    if (!time_limit_->begun()) {
      say(time_limit_->begin(unix_now(), read_latest(command_.ckpt_dir())));
      ask_ranks_to_checkpoint(*options_.slurm_batch);
    }
    const TimeLimitStop::Poll p = time_limit_->poll(unix_now(), read_latest(command_.ckpt_dir()));
    for (const auto& line : p.lines) say(line);
    return p.end_attempt;
  }

  // The restart that launched attempt `a`: how the previous attempt ended, where `a` resumed from.
  void log_restart(const AttemptRun& a) {
    RestartRecord r;
    r.attempt = state_.attempt;
    r.previous_exit_status = previous_status_;
    r.failed_rank = previous_verdict_ && !previous_verdict_->job_wide ? previous_verdict_->culprit_rank : std::nullopt;
    r.verdict = previous_verdict_;
    if (!a.resumed_from.empty()) r.resumed_from = a.resumed_from;
    r.relaunch_time = a.launched;
    r.first_resumed_step_time = first_step_after(run_dir_, a.launched);
    if (policy_.min_ranks) r.world = WorldChange{previous_world_, state_.world, world_reason_};
    log_.restarts.push_back(r);
  }

  AttemptOutcome outcome_of(const AttemptRun& a) {
    AttemptOutcome outcome;
    outcome.exit_status = status_;
    outcome.stop_requested = g_stop_requested || g_terminating;
    outcome.committed_checkpoint = read_latest(command_.ckpt_dir()) != a.resumed_from;
    previous_verdict_.reset();
    if (status_ != 0 && status_ != 2 && !outcome.stop_requested) judge_failure(a, outcome);
    return outcome;
  }

  // A failed attempt's verdict: said, written to RUN_DIR/attemptN.verdict.json, its flight records
  // moved aside, a lost or unreachable node kept off; its culprit goes to the policy in `outcome`.
  void judge_failure(const AttemptRun& a, AttemptOutcome& outcome) {
    AttemptEvidence evidence{run_dir_, read_whole(a.output_path), state_.world, a.ended, 0};
    evidence.now = unix_now();
    evidence.launched_at = a.launched;
    const auto t0 = std::chrono::steady_clock::now();
    AttemptVerdict v = probe_for_partition(judge_attempt(evidence), evidence);
    v.analysis_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // "diagnosed in" runs from the first failure trigger to the verdict, the analysis included.
    if (v.diagnosis_s) v.diagnosis_s = std::round((*v.diagnosis_s + *v.analysis_s) * 1000) / 1000;
    say(v.line(state_.attempt));
    write_json_file(run_dir_ + "/attempt" + std::to_string(state_.attempt) + ".verdict.json", v.to_json(true));
    move_flight_records(run_dir_, "flight.attempt" + std::to_string(state_.attempt));
    outcome.culprit_rank = v.job_wide ? std::nullopt : v.culprit_rank;
    outcome.culprit_host = v.culprit_host;
    if (v.verdict_class == VerdictClass::kNodeLost || v.verdict_class == VerdictClass::kNodeUnreachable) {
      outcome.lost_node_ranks = int(v.lost_ranks.size());
      note_lost_host(run_dir_, v.culprit_host, v.verdict_class == VerdictClass::kNodeLost ? "lost" : "unreachable",
                     lost_hosts_, live_slots_);
    }
    previous_verdict_ = v;
    if (metrics_) {
      metrics_->judged(state_.attempt, v, unix_now());
      metrics_->hosts_excluded(int(lost_hosts_.size()));
    }
  }

  // The policy's decision carried out: true once the next attempt may launch (after the backoff,
  // its world size chosen), false when the loop ends.
  bool restart(const NextAction& next, const AttemptRun& a) {
    if (!next.note.empty()) say(next.note);
    if (next.action == Action::kFinish) {
      say(next.message);
      if (status_ == 2) {
        const std::string last = last_message(read_whole(a.output_path));
        if (!last.empty()) std::cerr << last << std::endl;
      }
      return false;
    }
    if (next.action == Action::kExclude) {
      exclude_host(next);
      return false;
    }
    if (next.action == Action::kStop) {
      say(next.message);
      log_.stop_reason = next.message;
      return false;
    }
    const std::string latest = read_latest(command_.ckpt_dir());
    say(next.message + "; restarting from " + (latest.empty() ? "the start" : latest) + " in " +
        seconds_text(next.wait_s) + "s");
    interruptible_sleep(next.wait_s);
    if (g_stop_requested || g_terminating) {
      say("a stop was requested during the backoff: not restarted");
      return false;
    }
    previous_status_ = status_;
    previous_world_ = state_.world;
    world_reason_.reset();
    return !policy_.min_ranks || choose_next_world();
  }

  void exclude_host(const NextAction& next) {
    say("excluding host " + next.exclude_host + " (rank " + std::to_string(next.exclude_rank) + " named " +
        std::to_string(state_.same_culprit_runs) + " times in a row)");
    const int rc = run_child({"/bin/bash", "-c", options_.exclude_cmd + " \"$1\" \"$2\"", "exclude", next.exclude_host,
                              std::to_string(next.exclude_rank)});
    if (rc != 0) say("--exclude-cmd exited " + std::to_string(rc) + " (host " + next.exclude_host + ", rank " +
                     std::to_string(next.exclude_rank) + ")");
    log_.stop_reason = next.message;
    status_ = next.exit_status;
  }

  // The next attempt's world size (choose_world sets it in state_); false when none fits.
  bool choose_next_world() {
    const WorldChoice choice = choose_world(policy_, state_, capacity_now(options_));
    if (!choice.world) {
      say(choice.reason);
      log_.stop_reason = choice.reason;
      return false;
    }
    if (*choice.world != previous_world_) {
      world_reason_ = choice.reason;
      say("world size " + std::to_string(previous_world_) + " -> " + std::to_string(*choice.world) + " (" +
          choice.reason + "); grad_accum absorbs the difference");
    }
    return true;
  }

  const LauncherOptions& options_;
  const ChildCommand& command_;
  const RestartPolicy policy_;
  const std::string run_dir_;
  const std::string log_path_;
  LauncherMetrics* const metrics_;  // null without --metrics-port
  std::optional<TimeLimitStop> time_limit_;
  RestartLog log_;
  std::vector<std::string> lost_hosts_;    // nodes lost so far: the next attempts stay off them
  std::map<std::string, int> live_slots_;  // the other hosts and the ranks each held
  PolicyState state_;
  int status_ = 0;  // the last attempt's exit status (the policy's, after an exclusion)
  std::optional<AttemptVerdict> previous_verdict_;
  int previous_status_ = 0;
  std::optional<std::string> world_reason_;
  int previous_world_ = 0;
};

}  // namespace

void LauncherOptions::validate(const ChildCommand& command) const {
  if (!capacity_cmd.empty() && !policy.min_ranks)
    throw UsageError("--capacity-cmd needs --min-ranks M (the smallest world size to restart on)");
  if (policy.min_ranks && !command.rank_count())
    throw UsageError("--min-ranks needs the rank count in the command as -np N, -n N, --np N or --ntasks N");
  if (policy.min_ranks && !command.global_batch())
    throw UsageError("--min-ranks needs --global-batch N (and --micro-batch, default 1) in the command");
  if (metrics_port < 0 || metrics_port > 65535)
    throw UsageError("--metrics-port must be 0 (off) or a port in 1..65535 (got " + std::to_string(metrics_port) + ")");
  RestartPolicy p = policy;
  p.launch_world = command.rank_count().value_or(0);
  p.micro_batches = command.global_batch() ? *command.global_batch() / command.micro_batch() : 0;
  p.validate();
}

int run_resilient(const LauncherOptions& options, const ChildCommand& command) {
  options.validate(command);
  const std::string run_dir = command.run_dir();
  fs::create_directories(run_dir);
  install_handlers();
  const std::optional<LauncherEndpoint> served = serve_launcher_metrics(options, run_dir);
  // Records of an earlier job in this run folder would be read with this one's: kept apart.
  move_flight_records(run_dir, "flight.before");
  ResilientRun run(options, command, run_dir, served ? served->metrics.get() : nullptr);
  run.run_attempts();
  return run.finish();
}

}  // namespace shardtrain::launch
