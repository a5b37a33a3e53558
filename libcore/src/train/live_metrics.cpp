#include "shardtrain/train/live_metrics.hpp"

#include <algorithm>
#include <cmath>

#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/telemetry/gauge_families.hpp"

namespace shardtrain {
namespace {

constexpr std::size_t kMedianSteps = 64;  // the median step time's window: long enough to ride out one slow step

double median_of(std::deque<double> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(mid), values.end());
  double m = values[mid];
  if (values.size() % 2 == 0) m = (m + *std::max_element(values.begin(), values.begin() + std::ptrdiff_t(mid))) / 2;
  return m;
}

}  // namespace

LiveMetrics::LiveMetrics(LiveMetricsConfig config) : config_(std::move(config)), started_at_(FlightRecorder::now()) {}

void LiveMetrics::record_step(const StepRecord& record, double tokens_per_s, double mfu) {
  std::lock_guard<std::mutex> lock(mu_);
  last_ = record;
  last_->peers.clear();  // not served; keeps the copy small
  last_->extra = nullptr;
  last_at_ = FlightRecorder::now();
  tokens_per_s_ = tokens_per_s;
  mfu_ = mfu;
  recent_step_s_.push_back(record.step_s);
  if (recent_step_s_.size() > kMedianSteps) recent_step_s_.pop_front();
  median_step_s_ = median_of(recent_step_s_);
}

void LiveMetrics::record_checkpoint(std::int64_t step, double save_s, std::int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  checkpoint_ = Checkpoint{step, FlightRecorder::now(), save_s, double(bytes)};
}

void LiveMetrics::record_stragglers(const StragglerReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const RankScores& r : report.ranks)
    if (r.rank == config_.world_rank) scores_ = r;
  named_.clear();
  for (const StragglerFinding& f : report.stragglers)
    if (f.rank == config_.world_rank) named_.push_back(f);
}

void LiveMetrics::record_memory(const MemoryReport& memory) {
  std::lock_guard<std::mutex> lock(mu_);
  memory_ = memory;
}

std::vector<prometheus::MetricFamily> LiveMetrics::Collect() const {
  GaugeFamilies f(config_.labels);
  const double now = FlightRecorder::now();
  // Read before the lock: the flight recorders have their own, and a scrape must never wait on
  // the step loop longer than one record_* call.
  const std::optional<FlightEntry> in_flight = oldest_in_flight(config_.world_rank);
  std::lock_guard<std::mutex> lock(mu_);
  f.gauge("shardtrain_start_timestamp_seconds", "Unix time this trainer process started serving metrics", started_at_);
  f.gauge("shardtrain_steps_planned", "The job's --steps", double(config_.steps_planned));
  f.gauge("shardtrain_collective_timeout_seconds", "The job's --collective-timeout", config_.collective_timeout_s);
  if (in_flight)
    f.gauge("shardtrain_collective_in_flight_age_seconds",
            "Seconds since the oldest unfinished collective of this rank was submitted (flight recorder)",
            now - in_flight->t_enqueue,
            {{"comm_group", in_flight->group}, {"seq", std::to_string(in_flight->seq)}, {"op", op_name(in_flight->op)}});
  if (last_) {
    const StepRecord& r = *last_;
    f.gauge("shardtrain_step", "Optimizer steps completed", double(r.step + 1));
    f.gauge("shardtrain_last_step_timestamp_seconds", "Unix time the last step finished", last_at_);
    f.gauge("shardtrain_step_seconds", "The last step's seconds", r.step_s);
    f.gauge("shardtrain_step_median_seconds", "Median seconds of the last 64 steps", median_step_s_);
    f.gauge("shardtrain_tokens_per_second", "Tokens per second of the last step, all ranks", tokens_per_s_);
    f.gauge("shardtrain_mfu_ratio", "Model FLOPs utilisation of the last step (fraction, at most 1)", mfu_);
    f.gauge("shardtrain_loss", "Training loss of the last step", r.loss);
    f.gauge("shardtrain_loss_finite", "1 when the last step's loss is finite, else 0", std::isfinite(r.loss) ? 1 : 0);
    f.gauge("shardtrain_grad_norm", "Global gradient norm of the last step", r.grad_norm);
    f.gauge("shardtrain_learning_rate", "Learning rate of the last step", r.lr);
    const char* help = "Seconds of the last step in a section";
    f.gauge("shardtrain_step_section_seconds", help, r.data_s, {{"section", "data"}});
    f.gauge("shardtrain_step_section_seconds", help, compute_seconds(r), {{"section", "compute"}});
    f.gauge("shardtrain_step_section_seconds", help, r.comm_exposed_s, {{"section", "comm_exposed"}});
  }
  f.gauge("shardtrain_straggler_threshold", "The job's --straggler-threshold", config_.straggler_threshold);
  if (scores_)
    for (int s = 0; s < kNumSections; ++s) {
      const SectionScore& score = scores_->sections[std::size_t(s)];
      const std::string section = section_name(Section(s));
      const char* help = "This rank's straggler score in a section at the last live check (1: not behind)";
      f.gauge("shardtrain_straggler_score", help, score.relative, {{"section", section}, {"score", "relative"}});
      if (score.individual)
        f.gauge("shardtrain_straggler_score", help, *score.individual, {{"section", section}, {"score", "individual"}});
    }
  for (const StragglerFinding& named : named_)
    f.gauge("shardtrain_straggler_named",
            "This rank's score in a section where the last live check named it a straggler (absent: not named)",
            named.value, {{"section", section_name(named.section)}, {"score", named.individual ? "individual" : "relative"}});
  f.gauge("shardtrain_checkpoint_interval_steps", "The job's --ckpt-every (0: on a signal only)", config_.checkpoint_every);
  if (checkpoint_) {
    f.gauge("shardtrain_checkpoint_step", "Step of the newest checkpoint this job committed", double(checkpoint_->step));
    f.gauge("shardtrain_checkpoint_age_seconds", "Seconds since the newest checkpoint was committed",
            now - checkpoint_->committed_at);
    f.gauge("shardtrain_checkpoint_save_seconds", "Seconds the newest checkpoint's save took on this rank", checkpoint_->save_s);
    f.gauge("shardtrain_checkpoint_bytes", "Bytes this rank wrote for the newest checkpoint", checkpoint_->bytes);
  }
  if (memory_) {
    for (int c = 0; c < kNumMemoryCategories; ++c)
      f.gauge("shardtrain_memory_bytes", "Peak bytes of this rank in a memory category", memory_->peak[std::size_t(c)],
              {{"category", memory_category_name(MemoryCategory(c))}});
    f.gauge("shardtrain_memory_total_bytes", "Peak bytes of this rank, every category together", memory_->total);
  }
  if (config_.memory_budget_bytes > 0)
    f.gauge("shardtrain_memory_budget_bytes", "The job's --memory-budget per rank", config_.memory_budget_bytes);
  return f.take();
}

}  // namespace shardtrain
