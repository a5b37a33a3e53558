// The trainer's live metrics (--metrics-port; docs/RUNBOOK.md "Watching a job in Prometheus"):
// each rank serves its own series at http://ADDR:PORT+local_rank/metrics through prometheus-cpp
// (telemetry/metrics_endpoint.hpp; the trainer's set-up in libcore/src/train/live_metrics_server.hpp),
// every series labelled with the job (SLURM_JOB_ID when set,
// else the launch's flight-record job id), the run folder, the rank, the host and the exact
// version (data snapshot id, code version). The step loop hands each finished step, checkpoint,
// live straggler report and memory report over (under a mutex); a scrape reads them, and
// computes then what must move while the loop is blocked: the age of the oldest collective in
// flight (from the comm engine's flight recorder) and the newest checkpoint's age.
//
// Series (gauges; times in seconds, unix time for timestamps; deploy/prometheus/shardtrain.rules.yml
// alerts on them):
//   shardtrain_start_timestamp_seconds               when this process started serving (a restart moves it)
//   shardtrain_steps_planned                         --steps
//   shardtrain_step                                  steps completed (the next step's index)
//   shardtrain_last_step_timestamp_seconds           when the last step finished
//   shardtrain_step_seconds, shardtrain_step_median_seconds   the last step; median of the last 64
//   shardtrain_tokens_per_second, shardtrain_mfu_ratio        the job's, as the progress line
//   shardtrain_loss, shardtrain_loss_finite (1/0), shardtrain_grad_norm, shardtrain_learning_rate
//   shardtrain_step_section_seconds{section="data"|"compute"|"comm_exposed"}   of the last step
//   shardtrain_straggler_score{section, score="relative"|"individual"}, shardtrain_straggler_threshold
//                                                    every score of the last live check, named or not
//   shardtrain_straggler_named{section, score}      the score, only where the last live check named this
//                                                    rank a straggler (the naming rules of telemetry/straggler.hpp:
//                                                    a low score in a section too small to matter is not named)
//   shardtrain_collective_in_flight_age_seconds{comm_group, seq, op}   only while one is in flight
//                                                    (never with --flight-entries 0: no recorder)
//   shardtrain_collective_timeout_seconds
//   shardtrain_checkpoint_step, shardtrain_checkpoint_age_seconds, shardtrain_checkpoint_save_seconds,
//   shardtrain_checkpoint_bytes (this rank's), shardtrain_checkpoint_interval_steps (--ckpt-every)
//   shardtrain_memory_bytes{category} (peak per category), shardtrain_memory_total_bytes (peak of the sum),
//   shardtrain_memory_budget_bytes (--memory-budget, when set)
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/telemetry/straggler.hpp"

namespace shardtrain {

// What a scrape reports, fixed at start.
struct LiveMetricsConfig {
  std::map<std::string, std::string> labels;  // on every series (scrape_targets.hpp's ScrapeTarget labels)
  int world_rank = 0;                         // whose flight recorders to look in
  std::int64_t steps_planned = 0;
  double collective_timeout_s = 0;
  int checkpoint_every = 0;
  double memory_budget_bytes = 0;  // 0: none
  double straggler_threshold = 0;
};

class LiveMetrics : public prometheus::Collectable {
 public:
  explicit LiveMetrics(LiveMetricsConfig config);

  // A finished step: its record (loss, lr, grad norm, sections), the job's tokens/s and MFU.
  void record_step(const StepRecord& record, double tokens_per_s, double mfu);
  // A checkpoint committed now: its step, the seconds the save took and this rank's bytes.
  void record_checkpoint(std::int64_t step, double save_s, std::int64_t bytes);
  // This rank's scores and named findings in a live straggler report (the scores are ignored when
  // the report has none for it; the findings replace the last report's).
  void record_stragglers(const StragglerReport& report);
  void record_memory(const MemoryReport& memory);

  // At each scrape, from the endpoint's HTTP thread.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Checkpoint {
    std::int64_t step = 0;
    double committed_at = 0, save_s = 0, bytes = 0;
  };
  const LiveMetricsConfig config_;
  const double started_at_;  // unix seconds
  mutable std::mutex mu_;
  std::optional<StepRecord> last_;  // the last step's record
  double last_at_ = 0, tokens_per_s_ = 0, mfu_ = 0, median_step_s_ = 0;
  std::deque<double> recent_step_s_;  // the last kMedianSteps steps' seconds
  std::optional<Checkpoint> checkpoint_;
  std::optional<RankScores> scores_;
  std::vector<StragglerFinding> named_;  // this rank's findings in the last report
  std::optional<MemoryReport> memory_;
};

}  // namespace shardtrain
