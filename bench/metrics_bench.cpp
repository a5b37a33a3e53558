// Benchmark (not a timed test): what the live metrics (train/live_metrics.hpp) cost the step loop,
// per call: a step's publishing (record_step and record_memory, under the metrics' mutex) and one
// scrape's Collect (every family built, and the oldest collective in flight looked up in a full
// 2048-entry flight recorder; the step loop waits for it only when it publishes during a scrape).
// And what a step's TensorBoard events cost a rank (telemetry/tensorboard_events.hpp: the step
// record's scalars, one framed record appended with one write(2) to a file in a temporary folder).
// bench/specs/metrics.json divides them by a measured step, beside its noisier on/off runs. Run:
//   SHARDTRAIN_METRICS_BENCH=1 build/bench/shardtrain_bench "[metrics-bench]"
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include "per_call_timing.hpp"
#include "test_support.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/telemetry/tensorboard_events.hpp"
#include "shardtrain/train/live_metrics.hpp"

using namespace shardtrain;

using bench::median_ns_per_call;

TEST_CASE("train: live metrics cost per step and per scrape", "[.bench][metrics-bench]") {
  if (!std::getenv("SHARDTRAIN_METRICS_BENCH")) {
    WARN("skipped: set SHARDTRAIN_METRICS_BENCH=1");
    return;
  }
  const int world_rank = 4000;  // a rank of its own in the recorder registry
  LiveMetricsConfig config;
  config.labels = {{"train_job", "j"}, {"run_dir", "/runs/bench"}, {"rank", "0"}, {"host", "node"},
                   {"data_snapshot", "8cd5a6276648"}, {"code_version", "v1"}};
  config.world_rank = world_rank;
  LiveMetrics metrics(config);
  FlightGroup group;
  group.name = "dp", group.size = 2, group.world_ranks = {world_rank, world_rank + 1};
  auto recorder = register_flight_recorder(world_rank, group, 2048);
  for (int i = 0; i < 2048; ++i) {  // full, every entry completed but the last: the scan sees them all
    FlightEntry e;
    e.seq = std::uint64_t(i) + 1, e.group = "dp";
    const auto ticket = recorder->record(e);
    if (i < 2047) recorder->mark(ticket, FlightState::kCompleted);
  }
  StepRecord record;
  record.step_s = 0.3, record.loss = 3.0, record.lr = 1e-3, record.grad_norm = 1.0;
  MemoryReport memory;
  memory.total = 1e9;
  const double per_step = median_ns_per_call(100000, [&](int i) {
    record.step = i;
    metrics.record_step(record, 1000.0, 0.3);
    metrics.record_memory(memory);
  });
  std::size_t series = 0;
  const double per_scrape = median_ns_per_call(200, [&](int) {
    const auto families = metrics.Collect();
    series = 0;
    for (const auto& f : families) series += f.metric.size();
  });
  std::printf("metrics_ns_per_step %.1f\nmetrics_ns_per_scrape %.1f\nmetrics_series %zu\n", per_step, per_scrape, series);
  retire_flight_recorder(recorder.get());
  CHECK(series > 20);  // the step's series and the collective in flight were all built
}

TEST_CASE("telemetry: TensorBoard events cost per step", "[.bench][metrics-bench]") {
  if (!std::getenv("SHARDTRAIN_METRICS_BENCH")) {
    WARN("skipped: set SHARDTRAIN_METRICS_BENCH=1");
    return;
  }
  TensorBoardEventWriter writer(test::temp_dir("tb-bench"), 0);
  StepRecord record;
  record.step_s = 0.3, record.loss = 3.0, record.lr = 1e-3, record.grad_norm = 1.0, record.tokens_per_s = 1000.0;
  const double per_step = median_ns_per_call(2000, [&](int i) {  // rank 0's: every tag but the hold-out loss
    record.step = i;
    writer.write_step(record.step, tensorboard_step_scalars(record, true));
  });
  std::printf("tensorboard_ns_per_step %.1f\n", per_step);
  CHECK(read_tensorboard_event_file(writer.path()).events.size() == 1 + 7 * 2000);
}
