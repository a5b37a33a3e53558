// The run summary's cross-rank parts: every rank's median of each step-log timing column, the
// per-rank table with the slowest rank, the --baseline comparison (speedup, scaling efficiency
// E(W) = throughput_W / ((W / W_base) x throughput_base)) and a bare all-reduce yardstick. The
// summary itself (RunSummary, with its closing paragraph) is train/run_summary.hpp's: it holds the
// results of layers above this one.
#pragma once
#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

// One rank's median of each timing column (telemetry.hpp's kTimingColumns, in that order).
using ColumnMedians = std::array<double, kNumTimingColumns>;

// Collective: this rank's median of each column over `records`, gathered from all ranks ([rank]).
std::vector<ColumnMedians> gather_rank_medians(Communicator& comm, const std::vector<StepRecord>& records);

// One timing column over the ranks: the spread of their medians (seconds) and each rank's.
struct RankSpread {
  SeriesStats stats;
  std::vector<double> by_rank;  // [rank]
  static auto fields() {
    using namespace json_fields;
    return std::tuple{inlined(&RankSpread::stats), key("by_rank", &RankSpread::by_rank)};
  }
  bool operator==(const RankSpread&) const = default;
};
// The summary's "per_rank_medians": {"<column>": {"min", "median", "max", "by_rank": [...]}}, one
// entry per timing column (step_log.hpp's kTimingColumns).
struct PerRankTable {
  std::map<std::string, RankSpread> columns;
  const RankSpread& at(const std::string& column) const;  // UsageError naming a missing column
  static auto fields() { return std::tuple{json_fields::inlined(&PerRankTable::columns)}; }  // the columns are the object
  bool operator==(const PerRankTable&) const = default;
};
PerRankTable per_rank_table(const std::vector<ColumnMedians>& medians);
// The straggler: the rank with the largest median step time minus exposed communication (a
// synchronous step waits for it; its peers wait in exposed communication).
int slowest_rank(const std::vector<ColumnMedians>& medians);

// A baseline run's figures (--baseline), read from its summary by train/run_summary.hpp's
// read_baseline before any training starts.
// JSON (the summary's "baseline"): {"path", "throughput_tokens_per_s", "world_size"}.
struct Baseline {
  std::string path;
  double throughput_tokens_per_s = 0;
  int world_size = 1;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("path", &Baseline::path), key("throughput_tokens_per_s", &Baseline::throughput_tokens_per_s),
                      key("world_size", &Baseline::world_size)};
  }
  bool operator==(const Baseline&) const = default;
};
// A run of `world` ranks at `throughput` (tokens/s) against its baseline: the summary's
// "baseline", "speedup" (throughput over the baseline's) and "scaling_efficiency" (E(W) above).
struct ScalingVsBaseline {
  Baseline baseline;
  double speedup = 0, scaling_efficiency = 0;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("baseline", &ScalingVsBaseline::baseline), key("speedup", &ScalingVsBaseline::speedup),
                      key("scaling_efficiency", &ScalingVsBaseline::scaling_efficiency)};
  }
  bool operator==(const ScalingVsBaseline&) const = default;
};
ScalingVsBaseline scaling_against(const Baseline& baseline, double throughput, int world);

// Collective over `comm`: bus bandwidth (nccl-tests definition, algbw x 2(n-1)/n) of a blocking
// all_reduce of min(n, kYardstickMaxFloats) floats, best of 3 after a warm-up; 0 on a group of
// one. The cap, 16 MiB (four of the default 4 MiB gradient buckets): the yardstick runs at the end
// of the run with the whole state still allocated, so its buffer and the library's own receive
// buffer beside it add to the resident peak without a category naming them: a whole gradient
// (0.5 GB at GPT-2 small) did, then 2 x 64 MiB (a third of what the summary could not name on 2
// ranks at 124M). A yardstick for the
// trainer's own gradient all-reduce: pass a communicator of its own made with
// CommOptions::all_reduce = AllReduceAlgorithm::kLibrary, so it times the library's all-reduce
// (MPI_Iallreduce), still with a sequence number and the collective timeout.
inline constexpr std::size_t kYardstickMaxFloats = std::size_t(4) << 20;  // 16 MiB
double bare_allreduce_busbw(Communicator& comm, std::size_t n);

// A count for humans: 3290624 -> "3.29M", 24576 -> "24.6k".
std::string format_count(double value);

}  // namespace shardtrain
