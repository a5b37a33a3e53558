// release-gate's evaluation math (calibration.hpp, bootstrap.hpp, holdout_scores.hpp) against a
// small example worked by hand and against NumPy on the same probabilities
// (testdata/generators/release_metrics_reference.py -> testdata/release_metrics_reference.json), and the
// hold-out's attribution of scored tokens to owner and version slices (release_eval.hpp) by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "shardtrain/stats/bootstrap.hpp"
#include "shardtrain/stats/calibration.hpp"
#include "shardtrain/stats/holdout_scores.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/releaseeval/evaluation.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

nlohmann::json reference() {
  std::ifstream in(test::testdata_path("release_metrics_reference.json"));
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// Hand example: four positions, V = 3, each in its own confidence bin (away from bin edges).
//   p = (.72 .18 .10) t=0: right, conf .72, Brier .28^2+.18^2+.1^2   = .1208
//   p = (.65 .25 .10) t=1: wrong, conf .65, Brier .65^2+.75^2+.1^2   = .9950
//   p = (.09 .10 .81) t=2: right, conf .81, Brier .09^2+.1^2+.19^2   = .0542
//   p = (.52 .24 .24) t=2: wrong, conf .52, Brier .52^2+.24^2+.76^2  = .9056
// ECE = (|1-.72| + |0-.65| + |1-.81| + |0-.52|) / 4 = 1.64 / 4 = 0.41; Brier = 2.0756 / 4 = 0.5189.
const double kHand[4][3] = {{.72, .18, .10}, {.65, .25, .10}, {.09, .10, .81}, {.52, .24, .24}};
const int kHandTargets[4] = {0, 1, 2, 2};

}  // namespace

TEST_CASE("calibration: ECE, Brier and accuracy of a hand-worked example", "[release]") {
  CalibrationAccumulator acc;
  const double brier[4] = {.1208, .9950, .0542, .9056};
  for (int i = 0; i < 4; ++i) {
    const PositionScore s = score_probabilities(kHand[i], 3, kHandTargets[i]);
    CHECK(s.brier == Approx(brier[i]).margin(1e-12));
    CHECK(s.loss == Approx(-std::log(kHand[i][kHandTargets[i]])).margin(1e-12));
    CHECK(s.top5);  // V = 3: always
    acc.add(s);
  }
  // Sums of four products of two-decimal numbers: exact to ~1e-15; 1e-12 leaves room for rounding.
  CHECK(acc.ece() == Approx(0.41).margin(1e-12));
  CHECK(acc.brier() == Approx(0.5189).margin(1e-12));
  CHECK(acc.top1_accuracy() == 0.5);
  const auto table = acc.summary().reliability;
  REQUIRE(table.size() == 15);
  CHECK(table[10].count == 1);  // .72 * 15 = 10.8
  CHECK(table[10].accuracy == 1.0);
  CHECK(table[9].accuracy == 0.0);  // .65 * 15 = 9.75
  CHECK_FALSE(table[0].accuracy);
}

TEST_CASE("calibration: logits scored like NumPy on the same probabilities", "[release]") {
  const auto ref = reference();
  const int V = ref["vocab"];
  const std::vector<float> logits = ref["logits"];
  const std::vector<int> targets = ref["targets"];
  CalibrationAccumulator acc(ref["bins"]);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const PositionScore s = score_logits(logits.data() + i * V, V, targets[i]);
    // Both compute softmax in double from the same float32 logits: agreement to rounding (~1e-15
    // relative); 1e-12 absolute is far above that and far below any difference that matters.
    REQUIRE(s.loss == Approx(ref["loss"][i].get<double>()).margin(1e-12));
    REQUIRE(s.confidence == Approx(ref["confidence"][i].get<double>()).margin(1e-12));
    REQUIRE(s.brier == Approx(ref["brier_terms"][i].get<double>()).margin(1e-12));
    REQUIRE(s.top1 == ref["top1"][i].get<bool>());
    REQUIRE(s.top5 == ref["top5"][i].get<bool>());
    acc.add(s);
  }
  CHECK(acc.ece() == Approx(ref["ece"].get<double>()).margin(1e-12));
  CHECK(acc.brier() == Approx(ref["brier"].get<double>()).margin(1e-12));
  CHECK(acc.top1_accuracy() == Approx(ref["top1_accuracy"].get<double>()).margin(1e-15));
  CHECK(acc.top5_accuracy() == Approx(ref["top5_accuracy"].get<double>()).margin(1e-15));
  const auto table = acc.summary().reliability;
  for (std::size_t b = 0; b < table.size(); ++b) {
    const auto& want = ref["reliability"][b];
    CHECK(table[b].count == want["count"]);
    if (want["accuracy"].is_null()) {
      CHECK_FALSE(table[b].accuracy);
    } else {
      REQUIRE(table[b].accuracy);
      REQUIRE(table[b].mean_confidence);
      CHECK(*table[b].accuracy == Approx(want["accuracy"].get<double>()).margin(1e-12));
      CHECK(*table[b].mean_confidence == Approx(want["mean_confidence"].get<double>()).margin(1e-12));
    }
  }
}

TEST_CASE("bootstrap: hand-worked cases and the percentile rule", "[release]") {
  // numpy.percentile's linear rule: position q (n-1).
  CHECK(interpolated_percentile({1, 2, 3, 4}, 0.5) == 2.5);
  CHECK(interpolated_percentile({0, 10}, 0.25) == 2.5);
  CHECK(interpolated_percentile({5}, 0.975) == 5);
  // Units with the same per-token mean: every resample's ratio is that mean, so is the interval.
  const BootstrapInterval same = bootstrap_ratio_interval({2, 6}, {1, 3}, 200, 3);
  CHECK(same.estimate == 2);
  CHECK(same.lower == 2);
  CHECK(same.upper == 2);
  // Two one-token units of loss 1 and 3: a resample's mean is 1, 2 or 3 with probability 1/4, 1/2,
  // 1/4. With 1000 resamples the 2.5% and 97.5% positions (24.975 and 974.025 of 999) fall inside
  // the ~250 ones and ~250 threes, so the interval is [1, 3] (any seed; P(fewer than 26 ones) < 1e-80).
  const BootstrapInterval spread = bootstrap_ratio_interval({1, 3}, {1, 1}, 1000, 11);
  CHECK(spread.estimate == 2);
  CHECK(spread.lower == 1);
  CHECK(spread.upper == 3);
  // Deterministic: the same seed, the same interval; another seed draws differently.
  const std::vector<double> s = {1, 4, 2, 8, 5, 7}, t = {1, 2, 1, 3, 2, 2};
  const auto a = bootstrap_ratio_interval(s, t, 300, 5), b = bootstrap_ratio_interval(s, t, 300, 5);
  CHECK(a.lower == b.lower);
  CHECK(a.upper == b.upper);
  CHECK_THROWS_AS(bootstrap_ratio_interval({1}, {1, 2}, 10, 1), UsageError);
  CHECK_THROWS_AS(bootstrap_ratio_interval({1}, {1}, 1, 1), UsageError);
}

TEST_CASE("bootstrap: intervals equal NumPy's replay of the same draws", "[release]") {
  // Held by name: a range-for over reference()["bootstrap"] would read a destroyed temporary
  // (the function's json dies before the loop's first step; AddressSanitizer reported it).
  const nlohmann::json ref = reference();
  for (const auto& c : ref["bootstrap"]) {
    INFO(c["name"].get<std::string>());
    const BootstrapInterval i = bootstrap_ratio_interval(c["loss_sums"], c["tokens"], c["resamples"],
                                                         std::stoull(c["seed"].get<std::string>()), c["level"]);
    // Same draws; only the summation order of each resample differs (NumPy sums pairwise):
    // relative differences ~1e-15, checked at 1e-12.
    CHECK(i.estimate == Approx(c["estimate"].get<double>()).epsilon(1e-12));
    CHECK(i.lower == Approx(c["lower"].get<double>()).epsilon(1e-12));
    CHECK(i.upper == Approx(c["upper"].get<double>()).epsilon(1e-12));
    CHECK(i.lower < i.estimate);
    CHECK(i.upper > i.estimate);
  }
}

TEST_CASE("hold-out scores: slices, the worst one and those worse than the mean", "[release]") {
  HoldoutScores scores;
  // Owner a: 20 sequences of 8 positions at loss ~1; owner b: 20 at loss ~3 (version 2).
  const double p_easy[3] = {std::exp(-1.0), 1 - std::exp(-1.0), 0};
  for (std::uint64_t seq = 0; seq < 40; ++seq)
    for (int t = 0; t < 8; ++t) {
      const bool hard = seq >= 20;
      double p[3] = {p_easy[0], p_easy[1], p_easy[2]};
      if (hard) p[0] = std::exp(-3.0 + 0.01 * t), p[1] = 1 - p[0];
      scores.add(score_probabilities(p, 3, 0), seq, hard ? "b" : "a", hard ? 2 : 1);
    }
  const auto s = scores.summary({200, 9, 0.95});
  CHECK(s.tokens == 320);
  CHECK(s.sequences == 40);
  REQUIRE(s.slices.size() == 4);  // owner=a, owner=b, version=1, version=2
  CHECK(s.worst_slice == "owner=b");
  CHECK(s.slices_worse_than_mean == std::vector<std::string>{"owner=b", "version=2"});
  CHECK(s.slices[0].key == "owner=a");
  CHECK(s.slices[0].loss == Approx(1.0).margin(1e-12));
  CHECK(s.slices[0].units == 20);
  CHECK(s.loss == Approx((1.0 + (3.0 - 0.035)) / 2).margin(1e-12));
  CHECK_THROWS_AS(HoldoutScores().summary({}), UsageError);
}

TEST_CASE("release evaluation: scored tokens go to their document's owner and version slices", "[release]") {
  // vocab 8, separator 7, seq_len 4, cutoff 2024-01-10. Train: one early document. Hold-out, owner
  // "a": x (version 1, 5 tokens) then y (version 3, 6 tokens): stream x0..x4 SEP y0..y5, 12 tokens,
  // floor(11 / 4) = 2 samples: tokens [0,5) and [4,9). Sample 0's targets are tokens 1-4 (all x);
  // sample 1's are tokens 5 (the separator after x: x's), 6, 7, 8 (y's). So version=1 has 5 scored
  // tokens, version=3 has 3, owner=a 8. With a uniform unigram every loss is ln 8.
  const std::string path = test::temp_dir("release_eval") + "/d.h5";
  {
    data::DatasetWriter w(path, 8, "t8", 7);
    const std::vector<std::uint32_t> early = {1, 2, 3, 4, 5, 6, 1, 2, 3}, x = {0, 1, 2, 3, 4}, y = {5, 6, 0, 1, 2, 3};
    w.add_document("early", 1, parse_rfc3339("2024-01-01T00:00:00Z"), parse_rfc3339("2024-01-01T00:00:00Z"), "a", early);
    w.add_document("x", 1, parse_rfc3339("2024-01-11T00:00:00Z"), parse_rfc3339("2024-01-11T00:00:00Z"), "a", x);
    w.add_document("y", 3, parse_rfc3339("2024-01-12T00:00:00Z"), parse_rfc3339("2024-01-12T00:00:00Z"), "a", y);
    w.finish();
  }
  HoldoutPlan plan;
  plan.data_path = path;
  plan.cutoff = "2024-01-10T00:00:00Z";
  plan.seq_len = 4;
  plan.max_samples = 0;
  plan.bootstrap = {50, 1, 0.95};
  NgramModel uniform;
  uniform.vocab = 8;
  uniform.probabilities.assign(8, 1.0 / 8);
  const auto e = evaluate_ngram(uniform, plan);
  CHECK(e.holdout.samples == 2);
  std::map<std::string, double> tokens;
  for (const auto& sl : e.scores.slices) tokens[sl.key] = sl.tokens;
  CHECK(tokens == std::map<std::string, double>{{"owner=a", 8}, {"version=1", 5}, {"version=3", 3}});
  CHECK(e.scores.loss == Approx(std::log(8.0)).margin(1e-12));
}
