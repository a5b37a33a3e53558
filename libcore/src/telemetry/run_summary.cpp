#include "shardtrain/telemetry/run_summary.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"

namespace shardtrain {

std::string format_count(double value) {
  char buf[64];
  if (value >= 1e9) std::snprintf(buf, sizeof(buf), "%.2fB", value / 1e9);
  else if (value >= 1e6) std::snprintf(buf, sizeof(buf), "%.2fM", value / 1e6);
  else if (value >= 1e4) std::snprintf(buf, sizeof(buf), "%.1fk", value / 1e3);
  else std::snprintf(buf, sizeof(buf), "%.0f", value);
  return buf;
}

std::vector<ColumnMedians> gather_rank_medians(Communicator& comm, const std::vector<StepRecord>& records) {
  ColumnMedians mine{};
  for (int c = 0; c < kNumTimingColumns; ++c) {
    std::vector<double> values;
    for (const auto& r : records) values.push_back(r.*kTimingColumns[c].field);
    mine[c] = SeriesStats::of(values).median;
  }
  std::vector<double> all(std::size_t(comm.size()) * kNumTimingColumns);
  comm.all_gather(mine.data(), all.data(), kNumTimingColumns);
  std::vector<ColumnMedians> out(comm.size());
  for (int r = 0; r < comm.size(); ++r)
    for (int c = 0; c < kNumTimingColumns; ++c) out[r][c] = all[std::size_t(r) * kNumTimingColumns + c];
  return out;
}

PerRankTable per_rank_table(const std::vector<ColumnMedians>& medians) {
  PerRankTable table;
  for (int c = 0; c < kNumTimingColumns; ++c) {
    std::vector<double> values;
    for (const auto& m : medians) values.push_back(m[c]);
    table.columns[kTimingColumns[c].name] = {SeriesStats::of(values), values};
  }
  return table;
}

const RankSpread& PerRankTable::at(const std::string& column) const {
  const auto it = columns.find(column);
  if (it == columns.end()) throw UsageError("per-rank table: no column \"" + column + "\"");
  return it->second;
}

int slowest_rank(const std::vector<ColumnMedians>& medians) {
  constexpr int kStep = timing_column("step_s"), kExposed = timing_column("comm_exposed_s");
  static_assert(kStep >= 0 && kExposed >= 0);
  int slowest = 0;
  for (int r = 1; r < int(medians.size()); ++r)
    if (medians[r][kStep] - medians[r][kExposed] > medians[slowest][kStep] - medians[slowest][kExposed]) slowest = r;
  return slowest;
}

ScalingVsBaseline scaling_against(const Baseline& baseline, double throughput, int world) {
  return {baseline, throughput / baseline.throughput_tokens_per_s,
          throughput / (double(world) / baseline.world_size * baseline.throughput_tokens_per_s)};
}

double bare_allreduce_busbw(Communicator& comm, std::size_t n) {
  const int world = comm.size();
  if (world < 2) return 0.0;
  n = std::min(n, kYardstickMaxFloats);
  std::vector<float> buf(n, 1.0f);
  comm.all_reduce(buf.data(), n);  // warm-up
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    comm.barrier();
    const Stopwatch watch;
    comm.all_reduce(buf.data(), n);
    best = std::min(best, watch.seconds());
  }
  return bus_bandwidth(CollectiveOp::kAllReduce, n * sizeof(float), best, world);
}

}  // namespace shardtrain
