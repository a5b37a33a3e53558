// release-gate's decision utility (decision/utility.hpp) and the run's cost table (decision/costs.hpp)
// on hand-made evaluations and files. Reference values are worked by hand from the formula in the
// header; the probability of regret is checked against the exact distribution of a two-unit
// bootstrap (each draw picks a unit with probability 1/2) and against the interval code.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/stats/bootstrap.hpp"
#include "shardtrain/decision/costs.hpp"
#include "shardtrain/decision/policy.hpp"
#include "shardtrain/decision/utility.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

// An evaluation with only what the utility reads: per-sequence losses, the bootstrap settings and
// (for a checkpoint) the p99 latency.
CheckpointEvaluation evaluation(const std::string& kind, std::vector<double> loss_sums, std::vector<double> tokens,
                                double p99, int resamples = 200) {
  std::vector<std::uint64_t> ids(loss_sums.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  CheckpointEvaluation e;
  e.kind = kind;
  e.scores.interval.resamples = resamples;
  e.scores.interval.seed = 7;
  e.scores.interval.level = 0.95;
  e.scores.per_sequence = PerSequenceLosses{ids, loss_sums, tokens};
  if (kind == "checkpoint") e.latency.ms_per_sequence_p99 = p99;
  return e;
}

// A record's "utility" read back as release-gate reads it (through JsonFile, from the text).
UtilityEstimate read_back(const UtilityEstimate& u) {
  const nlohmann::json record = {{"utility", u.to_json()}};
  return UtilityEstimate::from_json(JsonFile::parse(record.dump(), "record.json", "the release record"), "/utility");
}

// A policy's "utility" block, read as read_release_policy reads it (its field list).
UtilityModel read_model(const nlohmann::json& j) { return json_fields::read_json<UtilityModel>(j, "p.json", "the policy"); }

UtilityModel model(double v, double n, double c, double b, double h, double bound) {
  return read_model({{"value_per_nat_token", v}, {"served_tokens_per_day", n}, {"cost_per_ms_p99_day", c},
                     {"bad_release_cost", b}, {"horizon_days", h}, {"regret_bound", bound}});
}

}  // namespace

TEST_CASE("utility: one paired sequence, worked by hand", "[release]") {
  // One unit: every resample is that unit, so S_r = S = (30 - 20) / 10 = 1 nat/token for all r.
  const auto cand = evaluation("checkpoint", {20}, {10}, 3.0), fall = evaluation("checkpoint", {30}, {10}, 2.0);
  // L = 3 - 2 = 1 ms; U(S) = 3 x (0.5 x 4 x 1 - 1 x 1) = 3 > 0 for every resample: P = 0, E = 3.
  UtilityEstimate u = estimate_utility(model(0.5, 4, 1, 100, 3, 0.05), cand, fall, "last-known-good");
  CHECK(u.loss_saved == Approx(1.0));
  CHECK(u.candidate_loss == Approx(2.0));
  CHECK(u.fallback_loss == Approx(3.0));
  CHECK(u.latency_applicable);
  CHECK(u.latency_delta_ms == Approx(1.0));
  CHECK(u.value_over_horizon == Approx(6.0));
  CHECK(u.latency_cost_over_horizon == Approx(3.0));
  CHECK(u.break_even_loss_saved == Approx(0.5));
  CHECK(u.regret_probability == 0);
  CHECK(u.expected_utility == Approx(3.0));
  CHECK(u.lower == Approx(3.0));
  CHECK(u.upper == Approx(3.0));
  CHECK(u.positive());
  CHECK(u.regret_within_bound());
  CHECK(u.seed == (7 ^ fnv1a64("utility")));
  // c = 2: U(S) = 3 x (2 - 2) = 0 exactly: no regret (not < 0) but not positive either.
  u = estimate_utility(model(0.5, 4, 2, 100, 3, 0.05), cand, fall, "lkg");
  CHECK(u.regret_probability == 0);
  CHECK(u.expected_utility == Approx(0.0).margin(1e-12));
  CHECK_FALSE(u.positive());
  // c = 3: U(S) = -3 for every resample: P = 1 and E = -3 - 100 x 1.
  u = estimate_utility(model(0.5, 4, 3, 100, 3, 0.05), cand, fall, "lkg");
  CHECK(u.regret_probability == 1);
  CHECK(u.expected_utility == Approx(-103.0));
  std::vector<std::string> failed;
  for (const auto& c : check_utility(u))
    if (!c.passed) failed.push_back(c.name);
  CHECK(failed == std::vector<std::string>{"utility", "regret"});
}

TEST_CASE("utility: the probability of regret of a two-unit bootstrap", "[release]") {
  // Unit 0 saves 10 nats over 10 tokens, unit 1 loses 30 over 10: a resample is {0,0} (S = 1),
  // a mix (S = -1) or {1,1} (S = -3). Against an n-gram (L = 0, not applicable) regret is S_r < 0,
  // probability 1 - 1/4 = 0.75 over the draws; S = (10 - 30) / 20 = -1.
  const int R = 4000;
  const auto cand = evaluation("checkpoint", {10, 40}, {10, 10}, 5.0, R), fall = evaluation("ngram", {20, 10}, {10, 10}, 0, R);
  const UtilityEstimate u = estimate_utility(model(1, 1, 1000, 50, 2, 0.05), cand, fall, "bigram");
  CHECK_FALSE(u.latency_applicable);
  CHECK(u.latency_delta_ms == 0);
  CHECK(u.loss_saved == Approx(-1.0));
  // Binomial(R, 0.75) / R: standard deviation 0.0068; 0.03 is over four of them.
  CHECK(u.regret_probability == Approx(0.75).margin(0.03));
  CHECK(u.regret_resamples == std::uint64_t(std::lround(u.regret_probability * R)));
  // The interval is U at the percentile interval of the saving (bootstrap_ratio_interval's, the
  // NumPy-checked code) minus B P.
  const BootstrapInterval s = bootstrap_ratio_interval({10, -30}, {10, 10}, R, u.seed, 0.95);
  CHECK(u.loss_saved_lower == Approx(s.lower));
  CHECK(u.loss_saved_upper == Approx(s.upper));
  CHECK(s.lower == Approx(-3.0));
  CHECK(s.upper == Approx(1.0));
  CHECK(u.lower == Approx(2 * s.lower - 50 * u.regret_probability));
  CHECK(u.upper == Approx(2 * s.upper - 50 * u.regret_probability));
  CHECK(u.expected_utility == Approx(2 * -1.0 - 50 * u.regret_probability));
  // The resample statistics are what the interval is taken from.
  auto stats = bootstrap_ratio_statistics({10, -30}, {10, 10}, R, u.seed);
  std::sort(stats.begin(), stats.end());
  CHECK(interpolated_percentile(stats, 0.025) == Approx(s.lower));
}

TEST_CASE("utility: record round trip, unusable inputs named", "[release]") {
  const auto cand = evaluation("checkpoint", {20, 12}, {10, 6}, 3.0), fall = evaluation("checkpoint", {30, 13}, {10, 6}, 2.5);
  const UtilityEstimate u = estimate_utility(model(0.5, 4, 1, 100, 3, 0.05), cand, fall, "last-known-good");
  CHECK(read_back(u).to_json() == u.to_json());
  CHECK(u.to_json()["formula"] == UtilityEstimate::kFormula);

  auto other = fall;
  other.scores.per_sequence->tokens[1] = 7;
  CHECK_THROWS_WITH(estimate_utility(u.model, cand, other, "x"), Catch::Contains("different hold-out sequences"));
  other = fall;
  other.scores.per_sequence.reset();
  CHECK_THROWS_WITH(estimate_utility(u.model, cand, other, "x"), Catch::Contains("register the baseline again"));

  nlohmann::json m = u.model.to_json();
  m.erase("served_tokens_per_day");
  CHECK_THROWS_WITH(read_model(m), "p.json: the policy has no field /served_tokens_per_day");
  m = u.model.to_json();
  m["regret_bound"] = 0;
  CHECK_THROWS_WITH(read_model(m), "p.json: the policy field /regret_bound is 0.0, not > 0.0 and <= 1.0");
  m = u.model.to_json();
  m["horizon_days"] = 0;
  CHECK_THROWS_WITH(read_model(m), "p.json: the policy field /horizon_days is 0.0, not > 0.0");
  m = u.model.to_json();
  m["bad_release_cost"] = -1;
  CHECK_THROWS_WITH(read_model(m), "p.json: the policy field /bad_release_cost is -1.0, not >= 0.0");
  CHECK_THROWS_WITH(read_model(nullptr), Catch::Contains("p.json: the policy") && Catch::Contains("is not an object (got null)"));
}

TEST_CASE("cost table: the pipeline's costs.json read, totals and lines", "[release]") {
  const nlohmann::json j = {
      {"format", "shardtrain-costs"},
      {"version", 1},
      {"source", "sacct"},
      {"storage_bytes", {{"dataset", 1000}, {"checkpoints", 5000}, {"records", 300}, {"total", 6300}}},
      {"preprocessing_s", 1.5},
      {"stages",
       {{{"stage", "prep"}, {"job_id", "11"}, {"state", "COMPLETED"}, {"cpus", 1}, {"runs", 1}, {"run_s", 2},
         {"compute_core_s", 2}, {"queue_wait_s", 0.5}},
        {{"stage", "train"}, {"job_id", 12}, {"state", "COMPLETED"}, {"cpus", 2}, {"runs", 2}, {"run_s", 30},
         {"compute_core_s", 60}, {"queue_wait_s", 120}, {"gpu_s", 0}},
        {{"stage", "proof"}, {"job_id", "13"}, {"state", "unknown (no longer in Slurm's memory)"}}}}};
  const CostTable t = CostTable::from_json(j, "run/x/costs.json");
  CHECK(t.dataset_bytes == 1000);
  CHECK(t.checkpoint_bytes == 5000);
  CHECK(t.record_bytes == 300);
  CHECK(*t.preprocessing_s == 1.5);
  REQUIRE(t.stages.size() == 3);
  CHECK(t.stages[1].job_id == "12");
  CHECK_FALSE(t.stages[2].run_s);
  CHECK(t.compute_core_s_total() == 62);
  CHECK(t.queue_wait_s_total() == 120.5);
  CHECK(t.to_json()["path"] == "run/x/costs.json");
  CHECK(t.to_json()["stages"] == j["stages"]);
  const std::string text = t.text();
  CHECK_THAT(text, Catch::Contains("checkpoints 5000 B"));
  CHECK_THAT(text, Catch::Contains("compute 62.0 core-s; queue wait 120.5 s"));
  CHECK_THAT(text, Catch::Contains("train"));

  auto bad = j;
  bad["format"] = "other";
  CHECK_THROWS_AS(CostTable::from_json(bad, "c.json"), UsageError);
  bad = j;
  bad["stages"][0]["queue_wait_s"] = "soon";
  CHECK_THROWS_WITH(CostTable::from_json(bad, "c.json"), Catch::Contains("queue_wait_s"));
  bad = j;
  bad.erase("storage_bytes");
  CHECK_THROWS_WITH(CostTable::from_json(bad, "c.json"), Catch::Contains("storage_bytes"));
  const std::string dir = test::temp_dir("costs");
  CHECK_THROWS_AS(CostTable::read(dir + "/missing.json"), IoError);
  write_json_file(dir + "/costs.json", j);
  CHECK(CostTable::read(dir + "/costs.json").stages.size() == 3);
}
