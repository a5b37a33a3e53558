#include "shardtrain/decision/costs.hpp"

#include "shardtrain/base/json_number.hpp"

#include <cstdio>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"

namespace shardtrain {
namespace {

// The key a release record adds to its copy of the table: the costs.json it came from.
constexpr const char* kRecordedPath = "path";

// A number or nothing: absent and null are "unknown"; anything else must be a number.
std::string cell(const std::optional<double>& v, int decimals) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, *v);
  return buf;
}

}  // namespace

double CostTable::compute_core_s_total() const {
  double t = 0;
  for (const auto& s : stages) t += s.compute_core_s.value_or(0);
  return t;
}

double CostTable::queue_wait_s_total() const {
  double t = 0;
  for (const auto& s : stages) t += s.queue_wait_s.value_or(0);
  return t;
}

CostTable CostTable::from_json(const nlohmann::json& j, const std::string& path) {
  const std::string what = path + ": the cost table";
  if (!j.is_object() || j.find("format") == j.end() || *j.find("format") != kCostsFormat)
    throw UsageError(what + " is not one (\"format\" must be \"" + kCostsFormat + "\"; release-gate costs RUN_DIR writes it)");
  CostTable t;
  t.path = path;
  t.json = j;
  t.json.erase(kRecordedPath);  // to_json adds it back
  if (j.contains("source") && !j.at("source").is_string()) throw UsageError(what + ": 'source' is not a string");
  t.source = j.value("source", "");
  if (!j.contains("storage_bytes") || !j["storage_bytes"].is_object()) throw UsageError(what + " has no object 'storage_bytes'");
  const auto& b = j["storage_bytes"];
  const std::string bw = what + " storage_bytes";
  t.dataset_bytes = json_optional_number(b, "dataset", bw).value_or(0);
  t.checkpoint_bytes = json_optional_number(b, "checkpoints", bw).value_or(0);
  t.record_bytes = json_optional_number(b, "records", bw).value_or(0);
  t.total_bytes = json_optional_number(b, "total", bw).value_or(t.dataset_bytes + t.checkpoint_bytes + t.record_bytes);
  t.preprocessing_s = json_optional_number(j, "preprocessing_s", what);
  if (!j.contains("stages") || !j["stages"].is_array()) throw UsageError(what + " has no array 'stages'");
  for (const auto& s : j["stages"]) {
    if (!s.is_object() || !s.contains("stage") || !s["stage"].is_string())
      throw UsageError(what + ": every stage needs a string 'stage'");
    const std::string sw = what + " stage " + s["stage"].get<std::string>();
    CostStage c;
    c.stage = s["stage"];
    if (s.contains("job_id") && s["job_id"].is_string()) c.job_id = s["job_id"];
    else if (s.contains("job_id") && s["job_id"].is_number()) c.job_id = std::to_string(s["job_id"].get<long long>());
    if (s.contains("state") && !s.at("state").is_string()) throw UsageError(sw + ": 'state' is not a string");
    c.state = s.value("state", "");
    c.cpus = json_optional_number(s, "cpus", sw);
    c.runs = json_optional_number(s, "runs", sw);
    c.run_s = json_optional_number(s, "run_s", sw);
    c.compute_core_s = json_optional_number(s, "compute_core_s", sw);
    c.queue_wait_s = json_optional_number(s, "queue_wait_s", sw);
    c.gpu_s = json_optional_number(s, "gpu_s", sw);
    t.stages.push_back(c);
  }
  return t;
}

CostTable CostTable::from_json(const JsonFile& f, const std::string& at) {
  const std::string recorded = json_fields::field(at, kRecordedPath);
  const std::string path = f.has(recorded) ? f.string(recorded) : f.path();
  try {
    return from_json(f.at(at), path);
  } catch (const UsageError& e) {
    throw UsageError(f.path() + ": field " + at + ": " + e.what());
  }
}

CostTable CostTable::read(const std::string& path) {
  return from_json(JsonFile::read(path, "the run's cost table (costs.json, --costs)").json(), path);
}

nlohmann::json CostTable::to_json() const {
  nlohmann::json j = json;
  j[kRecordedPath] = path;
  return j;
}

std::string CostTable::text() const {
  std::ostringstream t;
  t << "  costs (" << path << (source.empty() ? "" : ", Slurm figures from " + source) << "):\n"
    << "    stored: dataset " << cell(dataset_bytes, 0) << " B, checkpoints " << cell(checkpoint_bytes, 0) << " B, records "
    << cell(record_bytes, 0) << " B; preprocessing " << (preprocessing_s ? cell(preprocessing_s, 2) + " s" : "not run")
    << "; compute " << cell(compute_core_s_total(), 1) << " core-s; queue wait " << cell(queue_wait_s_total(), 1) << " s\n";
  char row[256];
  std::snprintf(row, sizeof row, "    %-9s %8s %-11s %5s %9s %10s %8s\n", "stage", "job", "state", "cpus", "run s",
                "core s", "queue s");
  t << row;
  for (const auto& s : stages) {
    std::snprintf(row, sizeof row, "    %-9s %8s %-11s %5s %9s %10s %8s\n", s.stage.c_str(),
                  s.job_id.empty() ? "-" : s.job_id.c_str(), s.state.c_str(), cell(s.cpus, 0).c_str(),
                  cell(s.run_s, 1).c_str(), cell(s.compute_core_s, 1).c_str(), cell(s.queue_wait_s, 1).c_str());
    t << row;
  }
  return t.str();
}

}  // namespace shardtrain
