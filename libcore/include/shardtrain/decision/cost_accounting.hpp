// The cost table of one pipeline run, measured (release-gate costs RUN_DIR): what
// the pipeline tool's costs stage writes to RUN_DIR/costs.json and costs.hpp reads back.
//
// Reads RUN_DIR/jobs.txt ("STAGE JOB_ID" lines, Slurm mode, written at submit) and
// RUN_DIR/stages.jsonl (one object per stage run by pipeline --stage or --local, pipeline/pipeline.hpp StageRecord: stage, ranks,
// wall_s, exit_status), and asks Slurm about each job: `sacct` (every run of a requeued job:
// --duplicates) where the cluster keeps accounting, else `scontrol show job` (finished jobs stay
// there for the cluster's MinJobAge, 300 s by default: the costs job runs right after the last stage),
// through slurm/accounting.hpp.
//
// Figures (docs/RUNBOOK.md, "Costs"), seconds and bytes:
//   storage_bytes    dataset (RUN/data.h5), checkpoints (every checkpoints/ folder in RUN), records
//                    (everything else in RUN: step logs, summaries, flight records, evidence, outputs)
//   preprocessing_s  the prep stage's wall seconds (data-prep)
//   per stage        compute core-seconds = run time x CPUs allocated (Slurm), or wall x ranks
//                    (--local); queue wait = start - submit (Slurm; a requeued job's later runs count
//                    their own wait, from the requeue), 0 when not queued; of it, the wait for
//                    resources = start - eligible (after its dependencies were met).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_record.hpp"

namespace shardtrain {

struct CostOptions {
  std::string own_job_id;  // this job (still running): left out of the table
  // A release registry: the table then counts the human review of the run's decisions (its
  // promotions, by the checkpoint folder under RUN_DIR, and the rollbacks whose run_dir is RUN_DIR;
  // each with the minutes its record says the policy asks for; pending until a sign-off in the
  // registry's reviews/ names it). "": no "review" (null).
  std::string registry;
};

// The "review" part of a table: decisions needing a person, their minutes, those still pending.
struct ReviewCosts {
  std::uint64_t decisions = 0, pending = 0;
  double minutes = 0;
  static auto fields() {  // written only (the cost table's "review")
    using namespace json_fields;
    return std::tuple{key("decisions", &ReviewCosts::decisions), key("minutes", &ReviewCosts::minutes),
                      key("pending", &ReviewCosts::pending)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
};
// The review of the decisions in `registry` that belong to `run_dir` (above).
ReviewCosts review_costs(const std::string& registry, const std::string& run_dir);

// Measures RUN_DIR (above) and returns the costs.json document (format "shardtrain-costs",
// version 1). UsageError when RUN_DIR is not a folder.
nlohmann::json measure_costs(const std::string& run_dir, const CostOptions& options = {});
// The table of a whole pattern (continual cycles): the runs' tables summed (bytes, preprocessing,
// compute, queue wait, review), their stages listed as "<run folder name>/<stage>"; "run" lists
// the runs. UsageError when `tables` is empty.
nlohmann::json total_costs(const std::vector<nlohmann::json>& tables);
// The table printed after writing: bytes, preprocessing, one row per stage, totals.
std::string costs_text(const nlohmann::json& costs);

}  // namespace shardtrain
