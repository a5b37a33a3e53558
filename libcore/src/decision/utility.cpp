#include "shardtrain/decision/utility.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/stats/bootstrap.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_number.hpp"

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

UtilityModel UtilityModel::from_json(const nlohmann::json& j, const std::string& where) {
  const std::string w = where + ": utility";
  if (!j.is_object()) throw UsageError(w + " missing (an object: value_per_nat_token, served_tokens_per_day, "
                                           "cost_per_ms_p99_day, bad_release_cost, horizon_days, regret_bound)");
  UtilityModel m;
  m.value_per_nat_token = json_number(j, "value_per_nat_token", w, NumberRange::at_least(0));
  m.served_tokens_per_day = json_number(j, "served_tokens_per_day", w, NumberRange::at_least(0));
  m.cost_per_ms_p99_day = json_number(j, "cost_per_ms_p99_day", w, NumberRange::at_least(0));
  m.bad_release_cost = json_number(j, "bad_release_cost", w, NumberRange::at_least(0));
  m.horizon_days = json_number(j, "horizon_days", w, NumberRange::at_least(0));
  if (!(m.horizon_days > 0)) throw UsageError(w + ": 'horizon_days' must be > 0");
  m.regret_bound = json_number(j, "regret_bound", w, NumberRange::at_least(0));
  if (!(m.regret_bound > 0 && m.regret_bound <= 1)) throw UsageError(w + ": 'regret_bound' is a probability in (0, 1]");
  return m;
}

nlohmann::json UtilityModel::to_json() const {
  return {{"value_per_nat_token", value_per_nat_token}, {"served_tokens_per_day", served_tokens_per_day},
          {"cost_per_ms_p99_day", cost_per_ms_p99_day},   {"bad_release_cost", bad_release_cost},
          {"horizon_days", horizon_days},                 {"regret_bound", regret_bound}};
}

nlohmann::json UtilityEstimate::to_json() const {
  return {{"formula", kFormula},
          {"model", model.to_json()},
          {"fallback", fallback},
          {"candidate_loss", candidate_loss},
          {"fallback_loss", fallback_loss},
          {"loss_saved", loss_saved},
          {"loss_saved_lower", loss_saved_lower},
          {"loss_saved_upper", loss_saved_upper},
          {"sequences", sequences},
          {"tokens", tokens},
          {"bootstrap", {{"resamples", resamples}, {"seed", seed}, {"level", level}}},
          {"latency",
           {{"applicable", latency_applicable},
            {"candidate_p99_ms", candidate_p99_ms},
            {"fallback_p99_ms", fallback_p99_ms},
            {"delta_ms", latency_delta_ms}}},
          {"value_over_horizon", value_over_horizon},
          {"latency_cost_over_horizon", latency_cost_over_horizon},
          {"break_even_loss_saved",
           std::isfinite(break_even_loss_saved) ? nlohmann::json(break_even_loss_saved) : nlohmann::json(nullptr)},
          {"regret_resamples", regret_resamples},
          {"regret_probability", regret_probability},
          {"expected_utility", expected_utility},
          {"lower", lower},
          {"upper", upper},
          {"positive", positive()},
          {"regret_within_bound", regret_within_bound()}};
}

UtilityEstimate UtilityEstimate::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  json_fields::require_object(f, at);
  UtilityEstimate u;
  u.model = UtilityModel::from_json(f.at(field(at, "model")), f.path() + ": " + f.what() + " " + field(at, "model"));
  u.fallback = f.string(field(at, "fallback"));
  u.candidate_loss = f.number(field(at, "candidate_loss"));
  u.fallback_loss = f.number(field(at, "fallback_loss"));
  u.loss_saved = f.number(field(at, "loss_saved"));
  u.loss_saved_lower = f.number(field(at, "loss_saved_lower"));
  u.loss_saved_upper = f.number(field(at, "loss_saved_upper"));
  u.sequences = json_fields::count(f, field(at, "sequences"));
  u.tokens = f.number(field(at, "tokens"));
  const std::string b = field(at, "bootstrap");
  u.resamples = json_fields::small_integer(f, field(b, "resamples"));
  u.seed = json_fields::count(f, field(b, "seed"));
  u.level = f.number(field(b, "level"));
  const std::string l = field(at, "latency");
  u.latency_applicable = json_fields::boolean(f, field(l, "applicable"));
  u.candidate_p99_ms = f.number(field(l, "candidate_p99_ms"));
  u.fallback_p99_ms = f.number(field(l, "fallback_p99_ms"));
  u.latency_delta_ms = f.number(field(l, "delta_ms"));
  u.value_over_horizon = f.number(field(at, "value_over_horizon"));
  u.latency_cost_over_horizon = f.number(field(at, "latency_cost_over_horizon"));
  // null: infinite (v N = 0, nothing saved is worth anything); the field itself must be there.
  (void)f.at(field(at, "break_even_loss_saved"));
  u.break_even_loss_saved =
      f.find_number(field(at, "break_even_loss_saved")).value_or(std::numeric_limits<double>::infinity());
  u.regret_resamples = json_fields::count(f, field(at, "regret_resamples"));
  u.regret_probability = f.number(field(at, "regret_probability"));
  u.expected_utility = f.number(field(at, "expected_utility"));
  u.lower = f.number(field(at, "lower"));
  u.upper = f.number(field(at, "upper"));
  return u;
}

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
