#include "shardtrain/telemetry/run_summary.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

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

nlohmann::json per_rank_table(const std::vector<ColumnMedians>& medians) {
  nlohmann::json table = nlohmann::json::object();
  for (int c = 0; c < kNumTimingColumns; ++c) {
    std::vector<double> values;
    for (const auto& m : medians) values.push_back(m[c]);
    table[kTimingColumns[c].name] = SeriesStats::of(values).to_json();
    table[kTimingColumns[c].name]["by_rank"] = values;
  }
  return table;
}

int slowest_rank(const std::vector<ColumnMedians>& medians) {
  constexpr int kStep = timing_column("step_s"), kExposed = timing_column("comm_exposed_s");
  static_assert(kStep >= 0 && kExposed >= 0);
  int slowest = 0;
  for (int r = 1; r < int(medians.size()); ++r)
    if (medians[r][kStep] - medians[r][kExposed] > medians[slowest][kStep] - medians[slowest][kExposed]) slowest = r;
  return slowest;
}

Baseline read_baseline(const std::string& path) {
  const JsonFile base = JsonFile::read(path, "the --baseline run summary");
  const double throughput = base.number("/throughput_tokens_per_s");
  if (!(throughput > 0)) base.fail("has no positive throughput_tokens_per_s; pass a ddp-train summary.json");
  return {path, throughput, int(base.find_number("/world_size").value_or(1))};
}

void add_scaling(nlohmann::json& summary, const Baseline& baseline, double throughput, int world) {
  summary["baseline"] = {{"path", baseline.path},
                         {"throughput_tokens_per_s", baseline.throughput_tokens_per_s},
                         {"world_size", baseline.world_size}};
  summary["speedup"] = throughput / baseline.throughput_tokens_per_s;
  summary["scaling_efficiency"] =
      throughput / (double(world) / baseline.world_size * baseline.throughput_tokens_per_s);
}

double bare_allreduce_busbw(Communicator& comm, std::size_t n) {
  const int world = comm.size();
  if (world < 2) return 0.0;
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

std::string summary_paragraph(const nlohmann::json& s) {
  const int world = s["world_size"].get<int>();
  const double median_step = s["median_step_s"].get<double>();
  const auto& medians = s["per_rank_medians"];
  std::string holdout, scaling;
  if (s.contains("eval") && !s["eval"].is_null())
    holdout = ", hold-out loss " + std::to_string(s["eval"]["holdout_loss"].get<double>()).substr(0, 5) + " nats/token";
  if (s.contains("scaling_efficiency"))
    scaling = "; scaling efficiency E(" + std::to_string(world) + ") = " +
              std::to_string(s["scaling_efficiency"].get<double>()).substr(0, 5);
  std::string datasheet;  // absent in summaries older than the field, null where the device is not in the table
  if (s.contains("mfu_datasheet") && !s["mfu_datasheet"].is_null())
    datasheet = " and " + std::to_string(100.0 * s["mfu_datasheet"].get<double>()).substr(0, 4) + "% of the " +
                s.value("device_name", std::string("device")) + "'s datasheet dense " +
                s.value("precision", std::string("")) + " peak";
  // Which peak MFU is over (absent in summaries older than "mfu_peak": the start-up measurement).
  std::string peak_basis = "measured";
  if (s.contains("mfu_peak") && s["mfu_peak"].is_object()) peak_basis = s["mfu_peak"].value("basis", peak_basis);
  char paragraph[2000];
  std::snprintf(paragraph, sizeof(paragraph),
                "summary: trained %lld steps (%s tokens) of a %s-parameter decoder on %d rank%s (%s) in %.1f s on %s. "
                "Loss went from %.3f to %.3f%s. Steady throughput %.0f tokens/s (median step %.3f s), MFU %.1f%% of "
                "the %.1f GFLOP/s per-rank matmul peak (%s)%s; data loading took %.2f%% and exposed communication "
                "%.2f%% of step time%s. Step log: %s; summary: %s.",
                (long long)s["steps"].get<std::int64_t>(), format_count(double(s["tokens"].get<std::int64_t>())).c_str(),
                format_count(s["parameters"].get<double>()).c_str(), world, world == 1 ? "" : "s",
                s["layout"].get<std::string>().c_str(), s["train_seconds"].get<double>(),
                s["backend"].get<std::string>().c_str(), s["first_loss"].get<double>(), s["final_loss"].get<double>(),
                holdout.c_str(), s["throughput_tokens_per_s"].get<double>(), median_step, 100.0 * s["mfu"].get<double>(),
                s["peak_flops_per_rank"].get<double>() / 1e9, peak_basis.c_str(), datasheet.c_str(),
                100.0 * medians["data_s"]["by_rank"][0].get<double>() / median_step,
                100.0 * medians["comm_exposed_s"]["by_rank"][0].get<double>() / median_step, scaling.c_str(),
                s["step_log"].get<std::string>().c_str(), s["summary"].get<std::string>().c_str());
  return paragraph;
}

}  // namespace shardtrain
