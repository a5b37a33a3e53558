// Benchmark (not a timed test): the flight recorder's and the phase marking's own cost, per
// recorded collective (record + started + completed, what the comm engine does for each
// operation) and per phase change (set_phase with the history on and off). bench/specs/recorder.json
// multiplies them by a training step's collectives and phase changes to bound their share of a
// step, beside its noisier on/off end-to-end runs. Run:
//   SHARDTRAIN_RECORDER_BENCH=1 build/bench/shardtrain_bench "[recorder-bench]"
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include "per_call_timing.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/phase.hpp"

using namespace shardtrain;

using bench::median_ns_per_call;

TEST_CASE("comm: flight recorder and phase marking cost per call", "[.bench][recorder-bench]") {
  if (!std::getenv("SHARDTRAIN_RECORDER_BENCH")) {
    WARN("skipped: set SHARDTRAIN_RECORDER_BENCH=1");
    return;
  }
  FlightGroup group;
  group.name = "dp";
  group.size = 2;
  group.world_ranks = {0, 1};
  FlightRecorder recorder(group, 2048);
  FlightEntry entry;
  entry.group = "dp";
  entry.numel = 1 << 20;
  entry.bytes = 4u << 20;
  const double per_collective = median_ns_per_call(200000, [&](int i) {
    FlightEntry e = entry;  // the engine builds one per operation
    e.seq = std::uint64_t(i) + 1;
    const auto ticket = recorder.record(std::move(e));
    recorder.mark(ticket, FlightState::kStarted);
    recorder.mark(ticket, FlightState::kCompleted);
  });
  const Phase phases[] = {Phase::kData, Phase::kForward, Phase::kBackward, Phase::kOptimizer, Phase::kStepEnd};
  set_phase_history_enabled(true);
  const double per_phase_on = median_ns_per_call(200000, [&](int i) { set_phase(phases[i % 5]); });
  set_phase_history_enabled(false);
  const double per_phase_off = median_ns_per_call(200000, [&](int i) { set_phase(phases[i % 5]); });
  set_phase_history_enabled(true);
  set_phase(Phase::kSetup);
  std::printf("recorder_ns_per_collective %.1f\nphase_ns_per_change_on %.1f\nphase_ns_per_change_off %.1f\n",
              per_collective, per_phase_on, per_phase_off);
  CHECK(recorder.snapshot().size() == 2048);  // the ring is full: the measured path overwrote entries
}
