// The resilient launcher's live metrics (run-resilient --metrics-port; docs/RUNBOOK.md "Watching a
// job in Prometheus"): what the trainer's ranks cannot say about themselves because they are the
// ones being restarted. The launcher's loop hands each attempt's start and end and each verdict
// over (under a mutex); a scrape, on the endpoint's HTTP thread, reads them.
//
// Series (gauges; every one labelled run_dir and host, and train_job when SLURM_JOB_ID is set):
//   shardtrain_launcher_start_timestamp_seconds   unix time the launcher started
//   shardtrain_launcher_attempt                   the current (or last) attempt's number: 0 is the first launch
//   shardtrain_launcher_restarts                  restarts so far (attempts started - 1)
//   shardtrain_launcher_world_size                ranks of the current (or last) attempt; 0 when the
//                                                 command names no rank count
//   shardtrain_launcher_running                   1 while an attempt's command runs, 0 in a backoff or after the last
//   shardtrain_launcher_last_exit_status          the last ended attempt's exit status (absent before one ends)
//   shardtrain_launcher_last_verdict{verdict_class, culprit_rank, culprit_host, attempt}
//                                                 unix time of the last failed attempt's verdict
//                                                 (attempt_verdict.hpp; culprit_rank "" for a job-wide
//                                                 error or none, culprit_host "" when unknown); absent
//                                                 before the first verdict
//   shardtrain_launcher_excluded_hosts            hosts the next attempts stay off (lost or unreachable nodes)
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "shardtrain/launch/attempt_verdict.hpp"

namespace shardtrain::launch {

class LauncherMetrics : public prometheus::Collectable {
 public:
  // `labels` go on every series (run_dir, host, train_job).
  explicit LauncherMetrics(std::map<std::string, std::string> labels);

  void attempt_started(int attempt, int world_size);
  void attempt_ended(int exit_status);
  // The verdict of failed attempt `attempt`, made at unix time `at`.
  void judged(int attempt, const AttemptVerdict& verdict, double at);
  void hosts_excluded(int count);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Verdict {
    int attempt = 0;
    std::string verdict_class, culprit_rank, culprit_host;
    double at = 0;
  };
  const std::map<std::string, std::string> labels_;
  const double started_at_;
  mutable std::mutex mu_;
  int attempt_ = 0, world_size_ = 0, excluded_hosts_ = 0;
  bool running_ = false;
  std::optional<int> last_exit_status_;
  std::optional<Verdict> last_verdict_;
};

}  // namespace shardtrain::launch
