#include "straggler_watch.hpp"

#include <algorithm>
#include <string>

#include "shardtrain/base/log.hpp"
#include "shardtrain/comm/phase.hpp"

namespace shardtrain {

StragglerOptions straggler_options(const TrainOptions& options) {
  StragglerOptions s;
  s.threshold = options.telemetry.straggler_threshold;
  s.window = options.telemetry.straggler_window;
  return s;
}

StragglerReport gather_straggler_report(Job& job, const std::vector<StepRecord>& records) {
  const StragglerOptions options = straggler_options(job.options);
  const RankProfile mine = profile_of(job.rank, samples_of(records), options.window);
  std::vector<RankProfile> all;
  if (job.world > 1) {
    const auto flat = flatten(mine);
    std::vector<double> gathered(std::size_t(job.world) * kProfileDoubles);
    job.comm->all_gather(flat.data(), gathered.data(), kProfileDoubles);
    for (int r = 0; r < job.world; ++r) all.push_back(unflatten(&gathered[std::size_t(r) * kProfileDoubles]));
  } else {
    all.push_back(mine);
  }
  return straggler_report(all, options);
}

void log_live_stragglers(Job& job, const std::vector<StepRecord>& records) {
  const std::size_t window = std::size_t(job.options.telemetry.straggler_window);
  if (records.size() < window) return;  // the same on every rank: one record per step
  set_phase(Phase::kStepEnd);
  const std::size_t keep = std::min(records.size(), kLiveWindows * window);
  const std::vector<StepRecord> recent(records.end() - std::ptrdiff_t(keep), records.end());
  const std::string names = format_straggler_names(gather_straggler_report(job, recent));
  if (!names.empty())
    log_line_rank0("step " + std::to_string(records.back().step + 1) + " " + names);
}

}  // namespace shardtrain
