// gpu-check: the device proof (issue 15) as one command, for a session lent a GPU (about 15 minutes
// of device time, at most 10 a command). It follows gpu_check_plan.hpp's plan, runs each stage's
// commands as argument vectors (no shell) under the stage's time limit (the child's process group
// is ended at the limit), and writes OUT/gpu-check/<stage>.json, <stage>.log and summary.json
// (docs/PERFORMANCE.md "gpu-check").
//
// Contract:
//   - Settings come from the environment, as the device commands of docs/RUNBOOK.md "GPUs" set
//     them: OUT (default ./gpu-check-out), BUILD_DIR, PART_BUDGET_S, GPT2_MICRO_BATCH, JOBS,
//     FORTUNES; a value that is not a positive number is a UsageError naming it.
//   - From the device bundle (the program in BUNDLE/bin beside BUNDLE/manifest.json and
//     BUNDLE/launch): nothing is built, the build stage checks every file of the manifest, the
//     part budget defaults to 480 s (540 s otherwise).
//   - Returns 0 when every stage run passed (skipped ones do not fail), 1 otherwise; a SIGTERM or
//     SIGINT ends the stage in flight (recorded "interrupted"), writes summary.json, returns 143.
#pragma once
#include <string>

namespace shardtrain::deviceproof {

struct GpuCheckOptions {
  std::string part = "all";  // 1, 2 or all
  std::string only;          // comma-separated stage names ("" = the part's)
  bool dry_run = false, list = false;
  std::string exe_dir;       // where this program is: finds the bundle, the build and the clone
};

int run_gpu_check(const GpuCheckOptions& options);

}  // namespace shardtrain::deviceproof
