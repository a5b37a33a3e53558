#include "shardtrain/train/run_summary.hpp"

#include <cstdio>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"

namespace shardtrain {
namespace {

using json_fields::or_null;

using json_fields::field;

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

MfuPeak MfuPeak::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  MfuPeak p;
  p.basis = f.string(field(at, "basis"));
  p.source = f.string(field(at, "source"));
  p.ranks_measured_at_once = json_fields::small_integer(f, field(at, "ranks_measured_at_once"));
  p.shared_cores = json_fields::null_or(f, field(at, "shared_cores"), json_fields::boolean);
  p.max_ranks_per_host = json_fields::null_or(f, field(at, "max_ranks_per_host"), json_fields::small_integer);
  p.host_cpus = json_fields::null_or(f, field(at, "host_cpus"), json_fields::small_integer);
  p.achieved_flops_per_rank = f.number(field(at, "achieved_flops_per_rank"));
  p.peak_exceeded = json_fields::boolean(f, field(at, "peak_exceeded"));
  return p;
}

nlohmann::json HostInfo::to_json() const { return {{"hostname", hostname}, {"cpus", cpus}}; }

HostInfo HostInfo::from_json(const JsonFile& f, const std::string& at) {
  return {f.string(field(at, "hostname")), json_fields::small_integer(f, field(at, "cpus"))};
}

nlohmann::json RunCommunication::to_json() const {
  nlohmann::json j = dp.to_json();
  if (bare_allreduce_busbw_GBps) j["bare_allreduce_busbw_GBps"] = *bare_allreduce_busbw_GBps;
  if (tp) j["tp"] = tp->to_json();
  return j;
}

RunCommunication RunCommunication::from_json(const JsonFile& f, const std::string& at) {
  RunCommunication c;
  c.dp = CommStats::from_json(f, at);
  c.bare_allreduce_busbw_GBps = f.find_number(field(at, "bare_allreduce_busbw_GBps"));
  if (f.has(field(at, "tp"))) c.tp = CommStats::from_json(f, field(at, "tp"));
  return c;
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
      {"rank_hosts", rank_hosts},
      {"steps", steps},
      {"first_step", first_step},
      {"stopped_by_signal", stopped_by_signal},
      {"checkpoint_dir", checkpoint_dir},
      {"tokens", tokens},
      {"train_seconds", train_seconds},
      {"wall_seconds", wall_seconds},
      {"startup", startup ? startup->to_json() : nlohmann::json(nullptr)},
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
      {"gemm", gemm},
      {"first_loss", first_loss},
      {"final_loss", final_loss},
      {"per_rank_medians", per_rank_medians.to_json()},
      {"slowest_rank", slowest_rank},
      {"stragglers", stragglers.to_json()},
      {"network_stragglers", network_stragglers.to_json()},
      {"exposed_comm_fraction", exposed_comm_fraction},
      {"communication", communication.to_json()},
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

nlohmann::json StartupTimes::to_json() const {
  return {{"to_first_step_s", to_first_step_s()}, {"before_job_s", before_job_s}, {"setup_s", setup_s},
          {"resume_s", resume_s}, {"loop_setup_s", loop_setup_s}};
}

StartupTimes StartupTimes::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  return {f.number(field(at, "before_job_s")), f.number(field(at, "setup_s")), f.number(field(at, "resume_s")),
          f.number(field(at, "loop_setup_s"))};
}

RunSummary RunSummary::from_json(const JsonFile& f, const std::string& at) {
  json_fields::require_object(f, at);
  const auto key = [&](const char* name) { return field(at, name); };
  RunSummary s;
  s.tool = f.string(key("tool"));
  s.identity = RunIdentity::from_json(f, key("identity"));
  json_fields::require_object(f, key("config"));
  s.config = f.at(key("config"));
  s.data = data::DataSelectionInfo::from_json(f, key("data"));
  s.backend = f.string(key("backend"));
  s.layout = f.string(key("layout"));
  s.parameters = f.number(key("parameters"));
  s.world_size = json_fields::small_integer(f, key("world_size"));
  s.host = HostInfo::from_json(f, key("host"));
  if (f.has(key("rank_hosts"))) s.rank_hosts = json_fields::strings(f, key("rank_hosts"));  // optional: newer than the format
  s.steps = json_fields::integer(f, key("steps"));
  s.first_step = json_fields::integer(f, key("first_step"));
  s.stopped_by_signal = json_fields::boolean(f, key("stopped_by_signal"));
  s.checkpoint_dir = f.string(key("checkpoint_dir"));
  s.tokens = json_fields::integer(f, key("tokens"));
  s.train_seconds = f.number(key("train_seconds"));
  s.wall_seconds = f.number(key("wall_seconds"));
  if (f.has(key("startup"))) s.startup = json_fields::null_or(f, key("startup"), StartupTimes::from_json);
  s.throughput_tokens_per_s = f.number(key("throughput_tokens_per_s"));
  s.median_step_s = f.number(key("median_step_s"));
  s.flops_per_token = f.number(key("flops_per_token"));
  s.peak_flops_per_rank = f.number(key("peak_flops_per_rank"));
  s.mfu = f.number(key("mfu"));
  s.mfu_peak = MfuPeak::from_json(f, key("mfu_peak"));
  const std::string precision_field = "field " + key("precision");
  try {
    s.precision = parse_precision(f.string(key("precision")), precision_field.c_str());
  } catch (const UsageError& e) {  // names the value and the choices; here with the file
    f.fail(e.what());
  }
  s.device_name = f.string(key("device_name"));
  s.peak_flops_datasheet_per_rank = json_fields::null_or(f, key("peak_flops_datasheet_per_rank"), &JsonFile::number);
  s.mfu_datasheet = json_fields::null_or(f, key("mfu_datasheet"), &JsonFile::number);
  if (f.has(key("gemm"))) s.gemm = f.at(key("gemm"));
  s.first_loss = f.number(key("first_loss"));
  s.final_loss = f.number(key("final_loss"));
  s.per_rank_medians = PerRankTable::from_json(f, key("per_rank_medians"));
  s.slowest_rank = json_fields::small_integer(f, key("slowest_rank"));
  s.stragglers = StragglerReport::from_json(f, key("stragglers"));
  if (f.has(key("network_stragglers")))  // optional: newer than the format's first version
    s.network_stragglers = NetworkStragglerReport::from_json(f, key("network_stragglers"));
  s.exposed_comm_fraction = f.number(key("exposed_comm_fraction"));
  s.communication = RunCommunication::from_json(f, key("communication"));
  s.memory_bytes_rank0 = MemoryReport::from_json(f, key("memory_bytes_rank0"));
  for (std::size_t i = 0, n = json_fields::array_size(f, key("memory_bytes_by_rank")); i < n; ++i)
    s.memory_bytes_by_rank.push_back(MemoryReport::from_json(f, field(key("memory_bytes_by_rank"), std::to_string(i))));
  s.eval = json_fields::null_or(f, key("eval"), HoldoutLoss::from_json);
  s.replica_checks = {json_fields::small_integer(f, field(key("replica_checks"), "every")),
                      json_fields::integer(f, field(key("replica_checks"), "checks"))};
  s.step_log = f.string(key("step_log"));
  s.params = f.string(key("params"));
  s.summary = f.string(key("summary"));
  if (f.has(key("baseline")))  // --baseline's three keys come together
    s.scaling = ScalingVsBaseline{Baseline::from_json(f, key("baseline")), f.number(key("speedup")),
                                  f.number(key("scaling_efficiency"))};
  return s;
}

RunSummary read_run_summary(const std::string& path, const std::string& what) {
  return RunSummary::from_json(JsonFile::read(path, what));
}

Baseline read_baseline(const std::string& path) {
  const RunSummary base = read_run_summary(path, "the --baseline run summary (a finished ddp-train/fsdp-train run's summary.json)");
  if (!(base.throughput_tokens_per_s > 0))
    throw UsageError(path + ": the --baseline run summary has no positive throughput_tokens_per_s; pass a finished "
                            "ddp-train/fsdp-train run's summary.json");
  return {path, base.throughput_tokens_per_s, base.world_size};
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
  // A job across nodes says which ranks ran where: "across 3 hosts (node1: 0; node2: 1; node3: 2)".
  const auto ranks_of_host = RankHosts{"", s.rank_hosts}.ranks_by_host();
  std::string hosts;
  if (ranks_of_host.size() > 1) {
    hosts = " across " + std::to_string(ranks_of_host.size()) + " hosts (";
    for (const auto& [host, ranks] : ranks_of_host) {
      hosts += (hosts.back() == '(' ? "" : "; ") + host + ":";
      for (std::size_t i = 0; i < ranks.size(); ++i) hosts += (i ? "," : " ") + std::to_string(ranks[i]);
    }
    hosts += ")";
  }
  std::string startup;
  if (s.startup) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), " The first step began %.1f s after launch (set-up %.1f s, resume %.1f s, "
                  "library choice and peak %.1f s).", s.startup->to_first_step_s(), s.startup->setup_s,
                  s.startup->resume_s, s.startup->loop_setup_s);
    startup = buf;
  }
  char paragraph[2600];
  std::snprintf(paragraph, sizeof(paragraph),
                "summary: trained %lld steps (%s tokens) of a %s-parameter decoder on %d rank%s (%s)%s in %.1f s on %s. "
                "Loss went from %.3f to %.3f%s. Steady throughput %.0f tokens/s (median step %.3f s), MFU %.1f%% of "
                "the %.1f GFLOP/s per-rank matmul peak (%s)%s; data loading took %.2f%% and exposed communication "
                "%.2f%% of step time%s.%s Step log: %s; summary: %s.",
                (long long)s.steps, format_count(double(s.tokens)).c_str(), format_count(s.parameters).c_str(), world,
                world == 1 ? "" : "s", s.layout.c_str(), hosts.c_str(), s.train_seconds, s.backend.c_str(), s.first_loss,
                s.final_loss, holdout.c_str(), s.throughput_tokens_per_s, median_step, 100.0 * s.mfu,
                s.peak_flops_per_rank / 1e9, s.mfu_peak.basis.c_str(), datasheet.c_str(),
                100.0 * s.per_rank_medians.at("data_s").by_rank.at(0) / median_step,
                100.0 * s.per_rank_medians.at("comm_exposed_s").by_rank.at(0) / median_step, scaling.c_str(),
                startup.c_str(), s.step_log.c_str(), s.summary.c_str());
  return paragraph;
}

}  // namespace shardtrain
