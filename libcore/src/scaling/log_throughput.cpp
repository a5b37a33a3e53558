// The step-log recomputation of a run's throughput (report.hpp's LogThroughput): from every rank's
// step log alone, without the summary, so the report can check the summary against it.
#include <algorithm>
#include <map>

#include "shardtrain/scaling/report.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

std::optional<LogThroughput> throughput_from_records(const std::vector<std::vector<StepLogEntry>>& ranks) {
  if (ranks.empty()) return std::nullopt;
  // step -> (ranks seen, tokens summed over ranks, slowest step_s)
  struct Step { std::size_t ranks = 0; double tokens = 0, step_s = 0; };
  std::map<std::int64_t, Step> steps;
  for (const auto& records : ranks)
    for (const StepLogEntry& e : records) {
      if (!e.has_tokens || !e.has_timings) continue;
      Step& s = steps[e.record.step];
      ++s.ranks;
      s.tokens += double(e.record.tokens);
      s.step_s = std::max(s.step_s, e.record.step_s);
    }
  std::vector<double> tokens, times;
  for (const auto& [step, s] : steps)
    if (s.ranks == ranks.size()) tokens.push_back(s.tokens), times.push_back(s.step_s);
  if (tokens.size() > 3) {  // the warm-up step pays for allocation (the trainer's rule, finish.cpp)
    tokens.erase(tokens.begin());
    times.erase(times.begin());
  }
  if (tokens.empty()) return std::nullopt;
  LogThroughput out;
  out.steps = int(tokens.size());
  out.tokens_per_step = SeriesStats::of(tokens).median;
  out.median_step_s = SeriesStats::of(times).median;
  if (out.median_step_s <= 0) return std::nullopt;
  out.throughput_tokens_per_s = out.tokens_per_step / out.median_step_s;
  return out;
}

}  // namespace shardtrain
