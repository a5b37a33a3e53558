// The launcher's watch of a running attempt (attempt_watch.hpp).
#include "shardtrain/launch/attempt_watch.hpp"

#include <algorithm>
#include <filesystem>

#include "shardtrain/base/error.hpp"
#include "shardtrain/diagnose/flight_dump.hpp"

namespace shardtrain::launch {

WatchDecision decide_watch(const WatchInput& in) {
  WatchDecision d;
  if (in.failure_seen.empty()) return d;
  double first = in.failure_seen.begin()->second, last = first;
  for (const auto& [rank, seen] : in.failure_seen) {
    first = std::min(first, seen);
    last = std::max(last, seen);
  }
  d.failed_at = first;
  d.complete = in.world_size > 0 && int(in.failure_seen.size()) >= in.world_size;
  d.end_at = d.complete ? last + in.complete_grace_s : first + in.settle_s + in.grace_s;
  d.end = in.now >= *d.end_at;
  return d;
}

std::vector<int> ranks_with_failure_records(const std::string& run_dir, double since, const std::map<int, double>& known) {
  namespace fs = std::filesystem;
  std::vector<int> ranks;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("flight.rank", 0) != 0 || e.path().extension() != ".json") continue;
    try {
      const hang::RankDump dump = hang::read_flight_dump(e.path().string());
      if (known.count(dump.rank)) continue;
      // A record without triggers[] (an older writer) states its reason and dump time alone.
      std::vector<hang::DumpTrigger> triggers = dump.triggers;
      if (triggers.empty()) triggers.push_back({dump.reason, dump.dumped_at});
      const bool failed = std::any_of(triggers.begin(), triggers.end(), [&](const hang::DumpTrigger& t) {
        return (t.reason == "timeout" || t.reason == "error") && (!t.at || *t.at >= since);
      });
      if (failed) ranks.push_back(dump.rank);
    } catch (const Error&) {
      // Unreadable now (see the header): looked at again next time.
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

}  // namespace shardtrain::launch
