// The cost table of a pipeline run (RUN_DIR/costs.json, written by release-gate costs (cost_accounting.hpp) at the end
// of the pipeline tool's chain; docs/FORMATS.md "Cost table"), as release-gate decide reads it into
// the release record and the decision's lines: bytes stored, preprocessing seconds, and per stage
// (one Slurm job, or one --local stage) its compute and the time it waited in the queue.
//
// Read fields (others are kept in `json` and copied as they are):
//   format "shardtrain-costs", version 1, source ("sacct", "scontrol show job" or "local"),
//   storage_bytes {dataset, checkpoints, records, total}, preprocessing_s (number or null),
//   stages[] {stage, job_id (string, number or null), state, cpus, runs, run_s, compute_core_s,
//   queue_wait_s, gpu_s (optional)}: a stage Slurm no longer remembers has only stage, job_id, state.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"

namespace shardtrain {

inline constexpr const char* kCostsFormat = "shardtrain-costs";

struct CostStage {
  std::string stage, job_id, state;  // job_id "" when the stage ran without Slurm
  std::optional<double> cpus, runs, run_s, compute_core_s, queue_wait_s, gpu_s;  // absent: unknown
  bool operator==(const CostStage&) const = default;
};

struct CostTable {
  std::string path, source;
  double dataset_bytes = 0, checkpoint_bytes = 0, record_bytes = 0, total_bytes = 0;
  std::optional<double> preprocessing_s;
  std::vector<CostStage> stages;
  nlohmann::json json;  // the file as read (less a record's "path"), what the record keeps
  bool operator==(const CostTable&) const = default;
  double compute_core_s_total() const;  // over the stages that report it
  double queue_wait_s_total() const;
  // The file's JSON, or a record's "costs" (its "path" then the one recorded). Throws UsageError
  // naming the file and the field ("PATH: the cost table ...").
  static CostTable from_json(const nlohmann::json& j, const std::string& path);
  // A release record's "costs" at `at`: its "path" the one recorded (absent: the record's own); an
  // error in it names the record and the field first (the file being read is the one to mend).
  static CostTable from_json(const JsonFile& record, const std::string& at);
  static CostTable read(const std::string& path);  // through base/json_file.hpp's JsonFile
  // The file's JSON with "path" added (the release record's "costs").
  nlohmann::json to_json() const;
  // A few lines for the decision: the bytes, the preprocessing and one row per stage.
  std::string text() const;
};

}  // namespace shardtrain
