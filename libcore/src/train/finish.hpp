// The training job's last phase, finish: the cross-rank measurements of the run (per-rank
// medians of every step-log column, communication totals, a bare all-reduce yardstick, every
// rank's memory peaks), the final parameters (params.h5), and on rank 0 the summary JSON
// (run_dir/summary.json) and its closing paragraph.
#pragma once
#include <optional>

#include "job.hpp"
#include "resume.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "step_loop.hpp"

namespace shardtrain {

// Collective. Returns the summary on rank 0 (also written and printed), nothing on the other ranks.
// `job_clock` has run since the job started (the summary's wall_seconds); `startup` is how the
// launch reached its first step (the summary's "startup").
std::optional<RunSummary> finish_job(Job& job, const ResumePoint& start, const LoopRecords& loop,
                                     const StepLog& step_log, const MfuBasis& mfu, const Stopwatch& job_clock,
                                     const StartupTimes& startup);

}  // namespace shardtrain
