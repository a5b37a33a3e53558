#include "shardtrain/train/run_summary.hpp"

#include <cstdio>
#include <cstring>

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"

namespace shardtrain {
namespace {

using json_fields::or_null;

template <typename T>
std::optional<T> optional_of(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (v.is_null()) return std::nullopt;
  return v.get<T>();
}

}  // namespace

nlohmann::json MfuPeak::to_json() const {
  return {{"basis", basis},
          {"source", source},
          {"ranks_measured_at_once", ranks_measured_at_once},
          {"shared_cores", or_null(shared_cores)},
          {"max_ranks_per_host", or_null(max_ranks_per_host)},
          {"host_cpus", or_null(host_cpus)},
          {"achieved_flops_per_rank", achieved_flops_per_rank},
          {"peak_exceeded", peak_exceeded}};
}

MfuPeak MfuPeak::from_json(const nlohmann::json& j) {
  MfuPeak p;
  p.basis = j.at("basis").get<std::string>();
  p.source = j.at("source").get<std::string>();
  p.ranks_measured_at_once = j.at("ranks_measured_at_once").get<int>();
  p.shared_cores = optional_of<bool>(j, "shared_cores");
  p.max_ranks_per_host = optional_of<int>(j, "max_ranks_per_host");
  p.host_cpus = optional_of<int>(j, "host_cpus");
  p.achieved_flops_per_rank = j.at("achieved_flops_per_rank").get<double>();
  p.peak_exceeded = j.at("peak_exceeded").get<bool>();
  return p;
}

nlohmann::json HostInfo::to_json() const { return {{"hostname", hostname}, {"cpus", cpus}}; }

HostInfo HostInfo::from_json(const nlohmann::json& j) {
  return {j.at("hostname").get<std::string>(), j.at("cpus").get<int>()};
}

nlohmann::json RunSummary::to_json() const {
  nlohmann::json memory_by_rank = nlohmann::json::array();
  for (const MemoryReport& r : memory_bytes_by_rank) memory_by_rank.push_back(r.to_json());
  nlohmann::json j = {
      {"tool", tool},
      {"identity", identity.to_json()},
      {"config", config},
      {"data", data.to_json()},
      {"backend", backend},
      {"layout", layout},
      {"parameters", parameters},
      {"world_size", world_size},
      {"host", host.to_json()},
      {"steps", steps},
      {"first_step", first_step},
      {"stopped_by_signal", stopped_by_signal},
      {"checkpoint_dir", checkpoint_dir},
      {"tokens", tokens},
      {"train_seconds", train_seconds},
      {"wall_seconds", wall_seconds},
      {"throughput_tokens_per_s", throughput_tokens_per_s},
      {"median_step_s", median_step_s},
      {"flops_per_token", flops_per_token},
      {"peak_flops_per_rank", peak_flops_per_rank},
      {"mfu", mfu},
      {"mfu_peak", mfu_peak.to_json()},
      {"precision", precision_name(precision)},
      {"device_name", device_name},
      {"peak_flops_datasheet_per_rank", or_null(peak_flops_datasheet_per_rank)},
      {"mfu_datasheet", or_null(mfu_datasheet)},
      {"first_loss", first_loss},
      {"final_loss", final_loss},
      {"per_rank_medians", per_rank_medians.to_json()},
      {"slowest_rank", slowest_rank},
      {"stragglers", stragglers.to_json()},
      {"exposed_comm_fraction", exposed_comm_fraction},
      {"communication", communication},
      {"memory_bytes_rank0", memory_bytes_rank0.to_json()},
      {"memory_bytes_by_rank", memory_by_rank},
      {"eval", eval ? eval->to_json() : nlohmann::json(nullptr)},
      {"replica_checks", {{"every", replica_checks.every}, {"checks", replica_checks.checks}}},
      {"step_log", step_log},
      {"params", params},
      {"summary", summary},
  };
  if (scaling) {
    j["baseline"] = scaling->baseline.to_json();
    j["speedup"] = scaling->speedup;
    j["scaling_efficiency"] = scaling->scaling_efficiency;
  }
  return j;
}

RunSummary RunSummary::from_json(const nlohmann::json& j) {
  RunSummary s;
  s.tool = j.at("tool").get<std::string>();
  s.identity = RunIdentity::from_json(j.at("identity"));
  s.config = j.at("config");
  s.data = data::DataSelectionInfo::from_json(j.at("data"));
  s.backend = j.at("backend").get<std::string>();
  s.layout = j.at("layout").get<std::string>();
  s.parameters = j.at("parameters").get<double>();
  s.world_size = j.at("world_size").get<int>();
  s.host = HostInfo::from_json(j.at("host"));
  s.steps = j.at("steps").get<std::int64_t>();
  s.first_step = j.at("first_step").get<std::int64_t>();
  s.stopped_by_signal = j.at("stopped_by_signal").get<bool>();
  s.checkpoint_dir = j.at("checkpoint_dir").get<std::string>();
  s.tokens = j.at("tokens").get<std::int64_t>();
  s.train_seconds = j.at("train_seconds").get<double>();
  s.wall_seconds = j.at("wall_seconds").get<double>();
  s.throughput_tokens_per_s = j.at("throughput_tokens_per_s").get<double>();
  s.median_step_s = j.at("median_step_s").get<double>();
  s.flops_per_token = j.at("flops_per_token").get<double>();
  s.peak_flops_per_rank = j.at("peak_flops_per_rank").get<double>();
  s.mfu = j.at("mfu").get<double>();
  s.mfu_peak = MfuPeak::from_json(j.at("mfu_peak"));
  s.precision = parse_precision(j.at("precision").get<std::string>(), "summary \"precision\"");
  s.device_name = j.at("device_name").get<std::string>();
  s.peak_flops_datasheet_per_rank = optional_of<double>(j, "peak_flops_datasheet_per_rank");
  s.mfu_datasheet = optional_of<double>(j, "mfu_datasheet");
  s.first_loss = j.at("first_loss").get<double>();
  s.final_loss = j.at("final_loss").get<double>();
  s.per_rank_medians = PerRankTable::from_json(j.at("per_rank_medians"));
  s.slowest_rank = j.at("slowest_rank").get<int>();
  s.stragglers = StragglerReport::from_json(j.at("stragglers"));
  s.exposed_comm_fraction = j.at("exposed_comm_fraction").get<double>();
  s.communication = j.at("communication");
  s.memory_bytes_rank0 = MemoryReport::from_json(j.at("memory_bytes_rank0"));
  for (const auto& r : j.at("memory_bytes_by_rank")) s.memory_bytes_by_rank.push_back(MemoryReport::from_json(r));
  if (!j.at("eval").is_null()) s.eval = HoldoutLoss::from_json(j.at("eval"));
  const auto& checks = j.at("replica_checks");
  s.replica_checks = {checks.at("every").get<int>(), checks.at("checks").get<std::int64_t>()};
  s.step_log = j.at("step_log").get<std::string>();
  s.params = j.at("params").get<std::string>();
  s.summary = j.at("summary").get<std::string>();
  if (j.contains("baseline"))
    s.scaling = ScalingVsBaseline{Baseline::from_json(j.at("baseline")), j.at("speedup").get<double>(),
                                  j.at("scaling_efficiency").get<double>()};
  return s;
}

RunSummary read_run_summary(const std::string& path) {
  const JsonFile file = JsonFile::read(path, "the run summary");
  try {
    return RunSummary::from_json(file.json());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's text after its "[json.exception.<kind>.<id>] " tag names the field or the type.
    const char* text = std::strchr(e.what(), ']');
    file.fail(text != nullptr ? std::string(text + 2) : std::string(e.what()));
  }
}

std::string summary_paragraph(const RunSummary& s) {
  const int world = s.world_size;
  const double median_step = s.median_step_s;
  std::string holdout, scaling;
  if (s.eval) holdout = ", hold-out loss " + std::to_string(s.eval->loss).substr(0, 5) + " nats/token";
  if (s.scaling)
    scaling = "; scaling efficiency E(" + std::to_string(world) + ") = " +
              std::to_string(s.scaling->scaling_efficiency).substr(0, 5);
  std::string datasheet;  // null where the device is not in the datasheet table
  if (s.mfu_datasheet)
    datasheet = " and " + std::to_string(100.0 * *s.mfu_datasheet).substr(0, 4) + "% of the " +
                (s.device_name.empty() ? std::string("device") : s.device_name) + "'s datasheet dense " +
                precision_name(s.precision) + " peak";
  char paragraph[2000];
  std::snprintf(paragraph, sizeof(paragraph),
                "summary: trained %lld steps (%s tokens) of a %s-parameter decoder on %d rank%s (%s) in %.1f s on %s. "
                "Loss went from %.3f to %.3f%s. Steady throughput %.0f tokens/s (median step %.3f s), MFU %.1f%% of "
                "the %.1f GFLOP/s per-rank matmul peak (%s)%s; data loading took %.2f%% and exposed communication "
                "%.2f%% of step time%s. Step log: %s; summary: %s.",
                (long long)s.steps, format_count(double(s.tokens)).c_str(), format_count(s.parameters).c_str(), world,
                world == 1 ? "" : "s", s.layout.c_str(), s.train_seconds, s.backend.c_str(), s.first_loss,
                s.final_loss, holdout.c_str(), s.throughput_tokens_per_s, median_step, 100.0 * s.mfu,
                s.peak_flops_per_rank / 1e9, s.mfu_peak.basis.c_str(), datasheet.c_str(),
                100.0 * s.per_rank_medians.at("data_s").by_rank.at(0) / median_step,
                100.0 * s.per_rank_medians.at("comm_exposed_s").by_rank.at(0) / median_step, scaling.c_str(),
                s.step_log.c_str(), s.summary.c_str());
  return paragraph;
}

}  // namespace shardtrain
