// Straggler scores inside a job (telemetry/straggler.hpp computes them): each rank profiles its own
// step records, one all-gather on the job's communicator brings every rank's profile together,
// and every rank computes the same report. Used live by the step loop (at its log steps) and once
// by the finish phase (the summary's "stragglers").
#pragma once
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "job.hpp"
#include "shardtrain/telemetry/network_straggler.hpp"
#include "shardtrain/telemetry/straggler.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

// The job's options for the scores (--straggler-threshold, --straggler-window).
StragglerOptions straggler_options(const TrainOptions& options);

// Collective over job.comm (one all-gather of kProfileDoubles doubles per rank; none on a group
// of one): the straggler report of every rank's `records`. Every rank must pass the same number
// of records (the step loop's records: one per step since the start or resume).
StragglerReport gather_straggler_report(Job& job, const std::vector<StepRecord>& records);

// Collective over job.comm (one all_gather_strings of every rank's per-peer figures, a line per
// step and peer): the network stragglers (telemetry/network_straggler.hpp) of `records`, hosts
// from job.rank_hosts. Every rank gets the same report.
NetworkStragglerReport gather_network_stragglers(Job& job, const std::vector<StepRecord>& records);

// The step loop's live check, at each step that prints a progress line. Collective, entered by
// every rank at the same steps; skipped on every rank (no collective) until `window` steps are
// recorded. Profiles the last kLiveWindows windows of steps only, so its cost stays bounded in a
// long run; rank 0 prints format_straggler_names() when a straggler is named, and
// format_network_stragglers() of the same steps when a host's links are named. Returns the
// straggler report it logged from (for the live metrics), nothing when it skipped.
inline constexpr int kLiveWindows = 10;
std::optional<StragglerReport> log_live_stragglers(Job& job, const std::vector<StepRecord>& records);

}  // namespace shardtrain
