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
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"

namespace shardtrain {

// The policy's "utility" block. Every field is required; from_json throws UsageError naming the
// field (`where` prefixes the message: the policy's path).
struct UtilityModel {
  double value_per_nat_token = 0;    // v: value per nat of loss saved per served token (>= 0)
  double served_tokens_per_day = 0;  // N (>= 0)
  double cost_per_ms_p99_day = 0;    // c: value lost per day per ms of added p99 latency (>= 0)
  double bad_release_cost = 0;       // B: one-off cost of promoting a release worse than the fallback (>= 0)
  double horizon_days = 1;           // H (> 0): how long a release is expected to serve
  double regret_bound = 0.05;        // promotion needs P(regret) < this; in (0, 1]
  bool operator==(const UtilityModel&) const = default;
  // {"value_per_nat_token", "served_tokens_per_day", "cost_per_ms_p99_day", "bad_release_cost",
  //  "horizon_days", "regret_bound"}: the policy file's block, and the record's copy of it.
  nlohmann::json to_json() const;
  static UtilityModel from_json(const nlohmann::json& j, const std::string& where);
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
  // {"formula", "model", "fallback", "candidate_loss", "fallback_loss", "loss_saved", "loss_saved_lower",
  //  "loss_saved_upper", "sequences", "tokens", "bootstrap": {"resamples","seed","level"},
  //  "latency": {"applicable","candidate_p99_ms","fallback_p99_ms","delta_ms"}, "value_over_horizon",
  //  "latency_cost_over_horizon", "break_even_loss_saved", "regret_resamples", "regret_probability",
  //  "expected_utility", "lower", "upper", "positive", "regret_within_bound"}
  bool operator==(const UtilityEstimate&) const = default;
  nlohmann::json to_json() const;
  // The record's "utility" at JSON pointer `at`; UsageError naming the file and the field.
  static UtilityEstimate from_json(const JsonFile& file, const std::string& at);
};

// The estimate of promoting `candidate` over `fallback` (both evaluations of one hold-out; the
// fallback may be an n-gram baseline's). Throws UsageError when either lacks scores.per_sequence
// (an evaluation from before it was recorded: register the baseline again) or the two do not
// list the same sequences with the same token counts.
UtilityEstimate estimate_utility(const UtilityModel& model, const CheckpointEvaluation& candidate,
                                 const CheckpointEvaluation& fallback, const std::string& fallback_name);

}  // namespace shardtrain
