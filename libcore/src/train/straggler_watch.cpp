#include "straggler_watch.hpp"

#include <algorithm>
#include <string>

#include <cstdio>
#include <sstream>

#include "shardtrain/base/log.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/comm/string_collectives.hpp"

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

NetworkStragglerReport gather_network_stragglers(Job& job, const std::vector<StepRecord>& records) {
  // This rank's figures as text, one "step peer bytes seconds" line per (step, peer).
  std::string mine;
  for (const StepRecord& r : records)
    for (const auto& [peer, t] : r.peers) {
      char line[96];
      std::snprintf(line, sizeof line, "%lld %d %llu %.9g\n", (long long)r.step, peer, (unsigned long long)t.bytes, t.seconds);
      mine += line;
    }
  const std::vector<std::string> all = job.world > 1 ? all_gather_strings(mine, *job.comm) : std::vector<std::string>{mine};
  std::vector<RankLinkStep> steps;
  for (int rank = 0; rank < int(all.size()); ++rank) {
    const std::string host = std::size_t(rank) < job.rank_hosts.size() ? job.rank_hosts[std::size_t(rank)] : "";
    std::istringstream in(all[std::size_t(rank)]);
    long long step = 0;
    int peer = 0;
    unsigned long long bytes = 0;
    double seconds = 0;
    while (in >> step >> peer >> bytes >> seconds) {
      if (steps.empty() || steps.back().rank != rank || steps.back().step != step) steps.push_back({rank, host, step, {}});
      steps.back().peers[peer] = PeerTransfer{bytes, seconds};
    }
  }
  return detect_network_stragglers(steps);
}

std::optional<StragglerReport> log_live_stragglers(Job& job, const std::vector<StepRecord>& records) {
  const std::size_t window = std::size_t(job.options.telemetry.straggler_window);
  if (records.size() < window) return std::nullopt;  // the same on every rank: one record per step
  set_phase(Phase::kStepEnd);
  const std::size_t keep = std::min(records.size(), kLiveWindows * window);
  const std::vector<StepRecord> recent(records.end() - std::ptrdiff_t(keep), records.end());
  StragglerReport report = gather_straggler_report(job, recent);
  const std::string names = format_straggler_names(report);
  if (!names.empty())
    log_line_rank0("step " + std::to_string(records.back().step + 1) + " " + names);
  const std::string network = format_network_stragglers(gather_network_stragglers(job, recent));
  if (!network.empty())
    log_line_rank0("step " + std::to_string(records.back().step + 1) + " " + network);
  return report;
}

}  // namespace shardtrain
