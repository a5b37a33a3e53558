// Decision utility of a release: what promoting the candidate is worth against keeping the fallback
// (the release in service) under the policy's utility model, with a bootstrap interval and the
// probability of regret. Model score alone does not decide a release: a lower loss that serves too
// slowly, or one that is likely noise, does not pay. docs/FORMATS.md ("Release policy", "Release
// record") and docs/RUNBOOK.md (a worked example) repeat the definitions.
//
// The two evaluations (releaseeval/checkpoint_evaluation.hpp) scored the same hold-out by the same code, so
// their scores.per_sequence pair up: for hold-out sequence i with t_i scored tokens,
//   d_i = fallback loss sum_i - candidate loss sum_i                  (nats; > 0: the candidate is better)
//   S   = sum(d) / sum(t)     loss saved per token (= fallback loss - candidate loss, nats/token)
//   S_r = the same ratio on bootstrap resample r = 0..R-1 (stats/bootstrap.hpp's draws, with the
//         candidate's bootstrap resamples and level and seed XOR fnv1a64("utility"))
//   L   = candidate p99 - fallback p99, ms per sequence (0 and "not applicable" against an n-gram,
//         which has no comparable latency: as the policy's latency check)
//   U(s) = H (v N s - c L)    the value of promoting over the horizon: v value per nat saved per served
//         token, N served tokens per day, c cost per day of each ms of p99 latency, H horizon days
//   P   = #{r : U(S_r) < 0} / R    the probability of regret: the candidate worse than the fallback
//         (equivalently S_r < the break-even saving c L / (v N))
//   E   = U(S) - B P          the expected utility: B is the one-off cost of a bad release
//   interval [U(S_lo) - B P, U(S_hi) - B P], S_lo/S_hi the percentile interval of the S_r (U grows
//         with s, so these are the same percentiles of U(S_r) - B P)
// Promotion needs E > 0 and P < regret_bound (the "utility" and "regret" checks of policy.hpp).
// Units: "value" is whatever currency the policy's numbers are in; per day, except B (per release).
#pragma once
#include <cstdint>
#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"

namespace shardtrain {

// The policy's "utility" block, and the record's copy of it. Every field is required; a read
// throws UsageError naming the file and the field.
struct UtilityModel {
  double value_per_nat_token = 0;    // v: value per nat of loss saved per served token (>= 0)
  double served_tokens_per_day = 0;  // N (>= 0)
  double cost_per_ms_p99_day = 0;    // c: value lost per day per ms of added p99 latency (>= 0)
  double bad_release_cost = 0;       // B: one-off cost of promoting a release worse than the fallback (>= 0)
  double horizon_days = 1;           // H (> 0): how long a release is expected to serve
  double regret_bound = 0.05;        // promotion needs P(regret) < this; in (0, 1]
  bool operator==(const UtilityModel&) const = default;
  static auto fields() {
    using namespace json_fields;
    using M = UtilityModel;
    const In at_least_0 = in(NumberRange::at_least(0));
    return std::tuple{key("value_per_nat_token", &M::value_per_nat_token, at_least_0),
                      key("served_tokens_per_day", &M::served_tokens_per_day, at_least_0),
                      key("cost_per_ms_p99_day", &M::cost_per_ms_p99_day, at_least_0),
                      key("bad_release_cost", &M::bad_release_cost, at_least_0),
                      key("horizon_days", &M::horizon_days, above(0)), key("regret_bound", &M::regret_bound, above(0, 1))};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static UtilityModel from_json(const JsonFile& f, const std::string& at) { return json_fields::read<UtilityModel>(f, at); }
};

// Every input and output of the formula above, so a record can be checked by hand.
struct UtilityEstimate {
  UtilityModel model;
  std::string fallback;                   // what it is compared with ("last-known-good", a baseline's name)
  double candidate_loss = 0, fallback_loss = 0;  // nats/token on the paired hold-out
  double loss_saved = 0;                  // S
  double loss_saved_lower = 0, loss_saved_upper = 0;  // S_lo, S_hi
  std::uint64_t sequences = 0;            // paired units
  double tokens = 0;                      // sum(t)
  int resamples = 0;
  std::uint64_t seed = 0;                 // the bootstrap seed used (already XORed with fnv1a64("utility"))
  double level = 0.95;
  bool latency_applicable = false;
  double candidate_p99_ms = 0, fallback_p99_ms = 0;  // 0 when not applicable
  double latency_delta_ms = 0;            // L
  double value_over_horizon = 0;          // H v N S
  double latency_cost_over_horizon = 0;   // H c L
  double break_even_loss_saved = 0;       // c L / (v N); infinite (null in JSON) when v N = 0
  std::uint64_t regret_resamples = 0;     // #{r : U(S_r) < 0}
  double regret_probability = 0;          // P
  double expected_utility = 0;            // E
  double lower = 0, upper = 0;            // E's interval
  bool positive() const { return expected_utility > 0; }
  bool regret_within_bound() const { return regret_probability < model.regret_bound; }
  static constexpr const char* kFormula = "E = H * (v * N * S - c * L) - B * P";
  bool operator==(const UtilityEstimate&) const = default;
  // An infinite number as null (break_even_loss_saved when v N = 0); the key must be there.
  struct InfiniteAsNull {
    double read(const JsonFile& f, const std::string& pointer) const {
      return json_fields::null_or(f, pointer, &JsonFile::number).value_or(std::numeric_limits<double>::infinity());
    }
    nlohmann::json write(double v) const { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
  };
  // The record's "utility"; "formula", "positive" and "regret_within_bound" are written, not read.
  static auto fields() {
    using namespace json_fields;
    using U = UtilityEstimate;
    return std::tuple{
        constant("formula", kFormula), key("model", &U::model), key("fallback", &U::fallback),
        key("candidate_loss", &U::candidate_loss), key("fallback_loss", &U::fallback_loss), key("loss_saved", &U::loss_saved),
        key("loss_saved_lower", &U::loss_saved_lower), key("loss_saved_upper", &U::loss_saved_upper),
        key("sequences", &U::sequences), key("tokens", &U::tokens),
        group("bootstrap", key("resamples", &U::resamples), key("seed", &U::seed), key("level", &U::level)),
        group("latency", key("applicable", &U::latency_applicable), key("candidate_p99_ms", &U::candidate_p99_ms),
              key("fallback_p99_ms", &U::fallback_p99_ms), key("delta_ms", &U::latency_delta_ms)),
        key("value_over_horizon", &U::value_over_horizon), key("latency_cost_over_horizon", &U::latency_cost_over_horizon),
        key("break_even_loss_saved", &U::break_even_loss_saved, InfiniteAsNull{}),
        key("regret_resamples", &U::regret_resamples), key("regret_probability", &U::regret_probability),
        key("expected_utility", &U::expected_utility), key("lower", &U::lower), key("upper", &U::upper),
        written("positive", &U::positive), written("regret_within_bound", &U::regret_within_bound)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static UtilityEstimate from_json(const JsonFile& f, const std::string& at) { return json_fields::read<UtilityEstimate>(f, at); }
};

// The estimate of promoting `candidate` over `fallback` (both evaluations of one hold-out; the
// fallback may be an n-gram baseline's). Throws UsageError when either lacks scores.per_sequence
// (an evaluation from before it was recorded: register the baseline again) or the two do not
// list the same sequences with the same token counts.
UtilityEstimate estimate_utility(const UtilityModel& model, const CheckpointEvaluation& candidate,
                                 const CheckpointEvaluation& fallback, const std::string& fallback_name);

}  // namespace shardtrain
