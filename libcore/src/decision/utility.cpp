#include "shardtrain/decision/utility.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/stats/bootstrap.hpp"

namespace shardtrain {
namespace {

// An evaluation's paired units: the per-sequence loss sums and token counts.
const PerSequenceLosses& units_of(const CheckpointEvaluation& evaluation, const std::string& which) {
  if (!evaluation.scores.per_sequence)
    throw UsageError("utility: the " + which + " evaluation has no scores.per_sequence (made by an older release-gate); "
                     "register the baseline again (release-gate baseline) or decide against a baseline evaluated since");
  const PerSequenceLosses& u = *evaluation.scores.per_sequence;
  if (u.sequence.size() != u.loss_sums.size() || u.tokens.size() != u.loss_sums.size() || u.loss_sums.empty())
    throw UsageError("utility: the " + which + " evaluation's scores.per_sequence arrays differ in length or are empty");
  return u;
}

}  // namespace

UtilityEstimate estimate_utility(const UtilityModel& model, const CheckpointEvaluation& candidate,
                                 const CheckpointEvaluation& fallback, const std::string& fallback_name) {
  const PerSequenceLosses &c = units_of(candidate, "candidate"), &f = units_of(fallback, "fallback");
  if (c.sequence != f.sequence || c.tokens != f.tokens)
    throw UsageError("utility: the candidate's and the fallback's evaluations scored different hold-out sequences; "
                     "decide against a baseline evaluated with the same --data, --cutoff, --seq-len and --max-samples");
  UtilityEstimate u;
  u.model = model;
  u.fallback = fallback_name;
  std::vector<double> saved(c.loss_sums.size());
  double c_sum = 0, f_sum = 0;
  for (std::size_t i = 0; i < saved.size(); ++i) {
    saved[i] = f.loss_sums[i] - c.loss_sums[i];
    c_sum += c.loss_sums[i];
    f_sum += f.loss_sums[i];
    u.tokens += c.tokens[i];
  }
  u.sequences = saved.size();
  u.candidate_loss = c_sum / u.tokens;
  u.fallback_loss = f_sum / u.tokens;
  const LossInterval& interval = candidate.scores.interval;
  u.resamples = interval.resamples;
  u.level = interval.level;
  u.seed = interval.seed ^ fnv1a64("utility");
  // The paired statistic's resamples: the same units and draws as the loss intervals, on d_i.
  if (!(u.level > 0 && u.level < 1)) throw UsageError("utility: the candidate's bootstrap level must be in (0, 1)");
  const std::vector<double> s_r = bootstrap_ratio_statistics(saved, c.tokens, u.resamples, u.seed);
  std::vector<double> sorted = s_r;
  std::sort(sorted.begin(), sorted.end());
  u.loss_saved = std::accumulate(saved.begin(), saved.end(), 0.0) / u.tokens;
  u.loss_saved_lower = interpolated_percentile(sorted, (1 - u.level) / 2);
  u.loss_saved_upper = interpolated_percentile(sorted, (1 + u.level) / 2);

  // Latency: only against a checkpoint (an n-gram's serving cost is not measured on this path).
  u.latency_applicable = fallback.is_checkpoint() && candidate.is_checkpoint();
  if (u.latency_applicable) {
    u.candidate_p99_ms = candidate.latency.ms_per_sequence_p99;
    u.fallback_p99_ms = fallback.latency.ms_per_sequence_p99;
    u.latency_delta_ms = u.candidate_p99_ms - u.fallback_p99_ms;
  }
  const double H = model.horizon_days, vN = model.value_per_nat_token * model.served_tokens_per_day;
  const double latency_cost = model.cost_per_ms_p99_day * u.latency_delta_ms;
  auto utility = [&](double s) { return H * (vN * s - latency_cost); };
  u.value_over_horizon = H * vN * u.loss_saved;
  u.latency_cost_over_horizon = H * latency_cost;
  u.break_even_loss_saved = vN > 0 ? latency_cost / vN : std::numeric_limits<double>::infinity();
  for (const double s : s_r) u.regret_resamples += utility(s) < 0;
  u.regret_probability = double(u.regret_resamples) / double(u.resamples);
  const double bad = model.bad_release_cost * u.regret_probability;
  u.expected_utility = utility(u.loss_saved) - bad;
  u.lower = utility(u.loss_saved_lower) - bad;
  u.upper = utility(u.loss_saved_upper) - bad;
  return u;
}

}  // namespace shardtrain
