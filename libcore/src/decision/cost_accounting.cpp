// The cost table of a pipeline run, measured (cost_accounting.hpp).
#include "shardtrain/decision/cost_accounting.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_number.hpp"
#include "shardtrain/decision/costs.hpp"
#include "shardtrain/decision/registry.hpp"
#include "shardtrain/slurm/accounting.hpp"
#include "shardtrain/slurm/job_list.hpp"
#include "shardtrain/telemetry/stage_record.hpp"

namespace shardtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::uintmax_t bytes_under(const fs::path& path) {
  std::uintmax_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_symlink(ec)) continue;
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

json stage_row_from_runs(const std::string& stage, const std::string& job, const std::vector<slurm::JobRun>& runs) {
  const slurm::JobRun& last = runs.back();
  double core_s = 0, run_s = 0, queue = 0, resource = 0;
  bool started = false;
  for (const auto& r : runs) {
    core_s += r.run_s * r.cpus;
    run_s += r.run_s;
    queue += r.queue_wait_s().value_or(0);
    resource += r.resource_wait_s().value_or(0);
    started |= bool(r.start);
  }
  json row = {{"stage", stage},
              {"job_id", job},
              {"state", last.state},
              {"runs", runs.size()},
              {"restarts", last.restarts.value_or(int(runs.size()) - 1)},
              {"cpus", last.cpus},
              {"compute_core_s", core_s},
              {"run_s", run_s},
              {"queue_wait_s", queue},
              {"resource_wait_s", resource},
              {"started", started}};
  if (!last.reason.empty() && last.reason != "None") row["reason"] = last.reason;
  return row;
}

// The jobs of RUN/jobs.txt (slurm/job_list.hpp), but this costs job's own; none when there is no file.
std::vector<slurm::ListedJob> listed_jobs(const std::string& run, const std::string& own_job_id) {
  std::vector<slurm::ListedJob> jobs;
  for (auto& job : slurm::read_job_list(run + "/jobs.txt"))
    if (job.job_id != own_job_id) jobs.push_back(std::move(job));
  return jobs;
}

// One row per listed job, from Slurm's accounting (`source` says which of its records answered).
json slurm_stage_rows(const std::vector<slurm::ListedJob>& jobs,
                      const std::vector<StageRecord>& local, std::string& source) {
  json rows = json::array();
  std::vector<std::string> ids;
  for (const auto& j : jobs) ids.push_back(j.job_id);
  const slurm::JobAccounting accounting = slurm::account_jobs(ids);
  source = accounting.source;
  for (const auto& [stage, job] : jobs) {
    const auto it = accounting.runs.find(job);
    const std::vector<slurm::JobRun> rs = it == accounting.runs.end() ? std::vector<slurm::JobRun>{} : it->second;
    if (rs.empty()) {
      rows.push_back({{"stage", stage}, {"job_id", job}, {"state", "unknown (no longer in Slurm's memory)"}});
      continue;
    }
    json row = stage_row_from_runs(stage, job, rs);
    // Slurm keeps run times in whole seconds: a job that ran 0.6 s reads 0. The job's own stage
    // line (stages.jsonl, written by the job, with its id) has the sub-second figure; for a job
    // that ran once, the larger of the two is its run time.
    if (rs.size() == 1)
      for (const auto& s : local)
        if (s.job_id == job && s.wall_s() > row.value("run_s", 0.0)) {
          row["run_s"] = s.wall_s();
          row["compute_core_s"] = row.value("run_s", 0.0) * row.value("cpus", 1);
        }
    rows.push_back(std::move(row));
  }
  return rows;
}

// One row per stage run here (stages.jsonl), the costs stage itself left out.
json local_stage_rows(const std::vector<StageRecord>& local) {
  json rows = json::array();
  for (const auto& s : local) {
    if (s.stage == "costs") continue;
    const double wall = s.wall_s();
    const int ranks = s.ranks;
    rows.push_back({{"stage", s.stage},
                    {"job_id", nullptr},
                    {"state", s.exit_status == 0 ? "COMPLETED" : "FAILED"},
                    {"cpus", ranks},
                    {"run_s", wall},
                    {"compute_core_s", wall * ranks},
                    {"queue_wait_s", 0.0},
                    {"resource_wait_s", 0.0},
                    {"started", true}});
  }
  return rows;
}

// The run's storage: {"dataset", "checkpoints", "records" (the rest), "total"} in bytes.
json storage_bytes(const std::string& run) {
  std::error_code ec;
  const std::uintmax_t dataset = fs::exists(run + "/data.h5", ec) ? fs::file_size(run + "/data.h5", ec) : 0;
  std::uintmax_t checkpoints = 0;
  for (auto it = fs::recursive_directory_iterator(run, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec) && it->path().filename() == "checkpoints") {
      checkpoints += bytes_under(it->path());
      it.disable_recursion_pending();
    }
  }
  const std::uintmax_t total = bytes_under(run);
  return {{"dataset", dataset},
          {"checkpoints", checkpoints},
          {"records", total - dataset - checkpoints},
          {"total", total}};
}

}  // namespace

json measure_costs(const std::string& run_dir_given, const CostOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(run_dir_given, ec))
    throw UsageError(run_dir_given + ": not a folder (release-gate costs takes a pipeline run folder, run/<name>)");
  const std::string run = fs::absolute(run_dir_given).lexically_normal().string();
  const std::vector<StageRecord> local = read_stage_records(run + "/stages.jsonl");
  const std::vector<slurm::ListedJob> jobs = listed_jobs(run, options.own_job_id);
  std::string source = "local";
  const json rows = jobs.empty() ? local_stage_rows(local) : slurm_stage_rows(jobs, local, source);
  const json storage = storage_bytes(run);
  std::optional<double> prep;
  for (const auto& s : local)
    if (s.stage == "prep") prep = s.wall_s();
  double core_total = 0, queue_total = 0;
  for (const auto& r : rows) {
    core_total += r.value("compute_core_s", 0.0);
    queue_total += r.value("queue_wait_s", 0.0);
  }
  return {{"format", kCostsFormat},
          {"version", 1},
          {"run", run},
          {"source", source},
          {"storage_bytes", storage},
          {"preprocessing_s", prep ? json(*prep) : json()},
          {"stages", rows},
          {"compute_core_s_total", core_total},
          {"queue_wait_s_total", queue_total},
          {"review", options.registry.empty() ? json() : review_costs(options.registry, run).to_json()}};
}


ReviewCosts review_costs(const std::string& registry_dir, const std::string& run_dir) {
  const ReleaseRegistry registry(registry_dir, true);
  const std::string run = fs::absolute(run_dir).lexically_normal().string();
  const auto under_run = [&](const std::string& path) {
    const std::string p = fs::absolute(path).lexically_normal().string();
    return p.size() > run.size() && p.compare(0, run.size(), run) == 0 && p[run.size()] == '/';
  };
  ReviewCosts c;
  const auto reviews = registry.reviews();
  const auto add = [&](const ReviewNeed& r, const std::string& path) {
    if (!r.required) return;
    ++c.decisions;
    c.minutes += r.minutes;
    // Pending until someone signs it off (release-gate review).
    c.pending += std::none_of(reviews.begin(), reviews.end(), [&](const ReviewSignOff& s) { return s.record == path; });
  };
  for (const auto& r : registry.history())
    if (!r.dry_run && under_run(r.artifact.folder)) add(r.review, r.record_path);
  for (const auto& b : registry.rollbacks())
    if (!b.run_dir.empty() && fs::absolute(b.run_dir).lexically_normal().string() == run) add(b.review, b.record_path);
  return c;
}

json total_costs(const std::vector<json>& tables) {
  if (tables.empty()) throw UsageError("release-gate costs: no run to add up");
  json runs = json::array(), stages = json::array(), sources = json::array();
  double dataset = 0, checkpoints = 0, records = 0, total = 0, core = 0, queue = 0;
  std::optional<double> prep;
  std::optional<ReviewCosts> review;
  for (const auto& t : tables) {
    const std::string run = t.value("run", "");
    runs.push_back(run);
    if (std::find(sources.begin(), sources.end(), t.value("source", "")) == sources.end()) sources.push_back(t.value("source", ""));
    const json& sb = t.at("storage_bytes");
    dataset += sb.value("dataset", 0.0);
    checkpoints += sb.value("checkpoints", 0.0);
    records += sb.value("records", 0.0);
    total += sb.value("total", 0.0);
    if (t.at("preprocessing_s").is_number()) prep = prep.value_or(0) + t.at("preprocessing_s").get<double>();
    for (json s : t.at("stages")) {
      s["stage"] = fs::path(run).filename().string() + "/" + s.value("stage", "");
      stages.push_back(s);
    }
    core += t.value("compute_core_s_total", 0.0);
    queue += t.value("queue_wait_s_total", 0.0);
    if (t.contains("review") && t["review"].is_object()) {
      const auto r = json_fields::read_json<ReviewCosts>(t, run + "/costs.json", "the run's cost table", "/review");
      if (!review) review = ReviewCosts{};
      review->decisions += r.decisions;
      review->pending += r.pending;
      review->minutes += r.minutes;
    }
  }
  std::string joined;
  for (const auto& s : sources) joined += (joined.empty() ? "" : ", ") + s.get<std::string>();
  return {{"format", kCostsFormat},
          {"version", 1},
          {"run", "the pattern of " + std::to_string(tables.size()) + " runs"},
          {"runs", runs},
          {"source", joined},
          {"storage_bytes", {{"dataset", dataset}, {"checkpoints", checkpoints}, {"records", records}, {"total", total}}},
          {"preprocessing_s", prep ? json(*prep) : json()},
          {"stages", stages},
          {"compute_core_s_total", core},
          {"queue_wait_s_total", queue},
          {"review", review ? review->to_json() : json()}};
}

std::string costs_text(const json& c) {
  char buf[512];
  std::ostringstream o;
  const json& sb = c.at("storage_bytes");
  o << "costs of " << c.value("run", "") << " (per-stage figures from " << c.value("source", "") << "):\n";
  o << "  stored: dataset " << sb.value("dataset", 0ull) << " B, checkpoints " << sb.value("checkpoints", 0ull)
    << " B, records " << sb.value("records", 0ull) << " B, total " << sb.value("total", 0ull) << " B\n";
  if (c.at("preprocessing_s").is_number()) {
    std::snprintf(buf, sizeof buf, "  preprocessing: %.2f s\n", c.at("preprocessing_s").get<double>());
    o << buf;
  } else {
    o << "  preprocessing: not run\n";
  }
  std::snprintf(buf, sizeof buf, "  %-16s %6s %-11s %4s %4s %8s %9s %8s %15s\n", "stage", "job", "state", "cpus", "runs",
                "run s", "core s", "queue s", "of it, for CPUs");
  o << buf;
  for (const auto& r : c.at("stages")) {
    const std::string job = r.contains("job_id") && r["job_id"].is_string() ? r["job_id"].get<std::string>() : "-";
    std::snprintf(buf, sizeof buf, "  %-16s %6s %-11s %4d %4d %8.1f %9.1f %8.1f %15.1f\n", r.value("stage", "").c_str(),
                  job.c_str(), r.value("state", "").c_str(), r.value("cpus", 0), r.value("runs", 1), r.value("run_s", 0.0),
                  r.value("compute_core_s", 0.0), r.value("queue_wait_s", 0.0), r.value("resource_wait_s", 0.0));
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "  total compute %.1f core-s, queue wait %.1f s\n", c.value("compute_core_s_total", 0.0),
                c.value("queue_wait_s_total", 0.0));
  o << buf;
  if (c.contains("review") && c["review"].is_object()) {
    const auto r = json_fields::read_json<ReviewCosts>(c, c.value("run", ""), "the cost table", "/review");
    std::snprintf(buf, sizeof buf, "  human review: %llu decisions, %.0f minutes, %llu pending\n",
                  static_cast<unsigned long long>(r.decisions), r.minutes, static_cast<unsigned long long>(r.pending));
    o << buf;
  }
  return o.str();
}

}  // namespace shardtrain
