#include "shardtrain/launch/launcher_metrics.hpp"


#include "shardtrain/base/time.hpp"
#include "shardtrain/telemetry/gauge_families.hpp"

namespace shardtrain::launch {
LauncherMetrics::LauncherMetrics(std::map<std::string, std::string> labels)
    : labels_(std::move(labels)), started_at_(unix_now()) {}

void LauncherMetrics::attempt_started(int attempt, int world_size) {
  std::lock_guard<std::mutex> lock(mu_);
  attempt_ = attempt;
  world_size_ = world_size;
  running_ = true;
}

void LauncherMetrics::attempt_ended(int exit_status) {
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  last_exit_status_ = exit_status;
}

void LauncherMetrics::judged(int attempt, const AttemptVerdict& verdict, double at) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool named = verdict.culprit_rank && !verdict.job_wide;
  last_verdict_ = Verdict{attempt, verdict_class_name(verdict.verdict_class),
                          named ? std::to_string(*verdict.culprit_rank) : "", verdict.culprit_host, at};
}

void LauncherMetrics::hosts_excluded(int count) {
  std::lock_guard<std::mutex> lock(mu_);
  excluded_hosts_ = count;
}

std::vector<prometheus::MetricFamily> LauncherMetrics::Collect() const {
  GaugeFamilies f(labels_);
  std::lock_guard<std::mutex> lock(mu_);
  f.gauge("shardtrain_launcher_start_timestamp_seconds", "Unix time the resilient launcher started", started_at_);
  f.gauge("shardtrain_launcher_attempt", "The current or last attempt's number (0: the first launch)", attempt_);
  f.gauge("shardtrain_launcher_restarts", "Restarts so far", attempt_);
  f.gauge("shardtrain_launcher_world_size", "Ranks of the current or last attempt (0: the command names no rank count)",
          world_size_);
  f.gauge("shardtrain_launcher_running", "1 while an attempt's command runs, else 0", running_ ? 1 : 0);
  if (last_exit_status_)
    f.gauge("shardtrain_launcher_last_exit_status", "Exit status of the last attempt that ended", *last_exit_status_);
  if (last_verdict_)
    f.gauge("shardtrain_launcher_last_verdict", "Unix time of the last failed attempt's verdict, named by its labels",
            last_verdict_->at,
            {{"verdict_class", last_verdict_->verdict_class},
             {"culprit_rank", last_verdict_->culprit_rank},
             {"culprit_host", last_verdict_->culprit_host},
             {"attempt", std::to_string(last_verdict_->attempt)}});
  f.gauge("shardtrain_launcher_excluded_hosts", "Hosts the next attempts stay off (lost or unreachable nodes)",
          excluded_hosts_);
  return f.take();
}

}  // namespace shardtrain::launch
