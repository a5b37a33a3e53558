// Straggler scores (telemetry/straggler.hpp) on hand-made step samples whose answers are worked out
// by hand in the comments: one case per naming rule, the individual score, and the step-log reader.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/telemetry/straggler.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using Approx = Catch::Detail::Approx;

namespace {

// One step's section times in milliseconds: data, forward, backward, comm_exposed, optimizer,
// checkpoint, other. The record's step_s is their sum (so "other" comes back as the last value).
using Ms = std::array<double, kNumSections>;

StepRecord record_of(std::int64_t step, const Ms& ms) {
  StepRecord r;
  r.step = step;
  r.data_s = ms[0] / 1e3;
  r.fwd_s = ms[1] / 1e3;
  r.bwd_s = ms[2] / 1e3;
  r.comm_exposed_s = ms[3] / 1e3;
  r.opt_s = ms[4] / 1e3;
  r.ckpt_s = ms[5] / 1e3;
  r.step_s = 0;
  for (double m : ms) r.step_s += m / 1e3;
  return r;
}

// `steps` steps from `first`, section times `ms` on each.
std::vector<StepRecord> steady(const Ms& ms, int steps, std::int64_t first = 0) {
  std::vector<StepRecord> out;
  for (int i = 0; i < steps; ++i) out.push_back(record_of(first + i, ms));
  return out;
}

std::vector<StepRecord> concat(std::vector<StepRecord> a, const std::vector<StepRecord>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The report as the summary and `hang-diagnose --stragglers --json` write it (StragglerReport's
// JSON); the text forms are made from it read back (from_json), so every case also checks that
// the report survives its round trip.
nlohmann::json report_of(const std::vector<std::vector<StepRecord>>& by_rank, StragglerOptions options = {}) {
  std::vector<RankProfile> profiles;
  for (int r = 0; r < int(by_rank.size()); ++r)
    profiles.push_back(profile_of(r, samples_of(by_rank[r]), options.window));
  const nlohmann::json j = straggler_report(profiles, options).to_json();
  CHECK(test::read_back<StragglerReport>(j).to_json() == j);
  return j;
}
std::string format_straggler_table(const nlohmann::json& report) {
  return shardtrain::format_straggler_table(test::read_back<StragglerReport>(report));
}
std::string format_straggler_names(const nlohmann::json& report) {
  return shardtrain::format_straggler_names(test::read_back<StragglerReport>(report));
}

const Ms kHealthy = {2, 20, 40, 10, 5, 0, 3};  // an 80 ms step

}  // namespace

TEST_CASE("straggler: a rank slow in data is named in data only, its waiting peers are not", "[straggler]") {
  // Rank 1 spends 60 ms more in data; ranks 0 and 2 wait those 60 ms at the gradient reduction.
  // Every step is 140 ms. data: fastest 2 ms, rank 1 relative 2/62 = 0.032, lost 60 ms >= 7 ms
  // (5% of 140). comm_exposed: ranks 0 and 2 relative 10/70 = 0.143, held back by rule b.
  const Ms waiting = {2, 20, 40, 70, 5, 0, 3}, slow_data = {62, 20, 40, 10, 5, 0, 3};
  const nlohmann::json report = report_of({steady(waiting, 40), steady(slow_data, 40), steady(waiting, 40)});
  INFO(format_straggler_table(report));
  REQUIRE(report["median_step_s"].get<double>() == Approx(0.140));
  REQUIRE(report["stragglers"].size() == 1);
  const auto& s = report["stragglers"][0];
  CHECK(s["rank"] == 1);
  CHECK(s["section"] == "data");
  CHECK(s["score"] == "relative");
  CHECK(s["value"].get<double>() == Approx(2.0 / 62.0));
  CHECK(s["lost_s"].get<double>() == Approx(0.060));
  REQUIRE(report["not_named"].size() == 2);
  for (const auto& held : report["not_named"]) {
    CHECK(held["section"] == "comm_exposed");
    CHECK(held["rank"] != 1);
    CHECK(held["value"].get<double>() == Approx(10.0 / 70.0));
    CHECK(held["why"].get<std::string>().rfind("rule b", 0) == 0);
  }
  CHECK(report["waited_for"] == 1);
  // Steady times: every individual score is 1 (40 steps = 4 windows of 10).
  CHECK(report["ranks"][1]["sections"]["data"]["individual"].get<double>() == Approx(1.0));
  CHECK(format_straggler_names(report) == "stragglers: rank 1 data (relative 0.03, +60 ms/step)");
}

TEST_CASE("straggler: noise on a tiny section is not named, a real optimizer straggler is and its waiter is not",
          "[straggler]") {
  // Rank 1's optimizer takes 7.5 ms against 5 ms (relative 0.667); rank 0 waits the 2.5 ms in the
  // step-end agreement ("other": 5.5 ms against 3, relative 0.545). Both steps are 82.5 ms.
  const Ms waiter = {2, 20, 40, 10, 5, 0, 5.5}, slow_opt = {2, 20, 40, 10, 7.5, 0, 3};
  const std::vector<std::vector<StepRecord>> runs = {steady(waiter, 20), steady(slow_opt, 20)};

  // Default min_share 5%: 2.5 ms lost < 4.125 ms, both held back by rule a.
  const nlohmann::json noisy = report_of(runs);
  INFO(format_straggler_table(noisy));
  CHECK(noisy["stragglers"].empty());
  REQUIRE(noisy["not_named"].size() == 2);
  for (const auto& held : noisy["not_named"]) CHECK(held["why"].get<std::string>().rfind("rule a", 0) == 0);
  CHECK(format_straggler_names(noisy).empty());
  const std::string table = format_straggler_table(noisy);
  CHECK(table.find("no stragglers\nnot named: 2 low scores losing under 5% of the median step") != std::string::npos);

  // min_share 1% (floor 0.825 ms): rank 1 is named in optimizer; rank 0's "other" is the wait for
  // it (rule c: 2.5 ms >= half of 2.5 ms).
  StragglerOptions fine;
  fine.min_share = 0.01;
  const nlohmann::json report = report_of(runs, fine);
  INFO(format_straggler_table(report));
  REQUIRE(report["stragglers"].size() == 1);
  CHECK(report["stragglers"][0]["rank"] == 1);
  CHECK(report["stragglers"][0]["section"] == "optimizer");
  CHECK(report["stragglers"][0]["value"].get<double>() == Approx(5.0 / 7.5));
  REQUIRE(report["not_named"].size() == 1);
  CHECK(report["not_named"][0]["rank"] == 0);
  CHECK(report["not_named"][0]["section"] == "other");
  CHECK(report["not_named"][0]["value"].get<double>() == Approx(3.0 / 5.5));
  CHECK(report["not_named"][0]["why"].get<std::string>().rfind("rule c: the wait for rank 1", 0) == 0);
}

TEST_CASE("straggler: a rank that slows down mid-run is named by its individual score", "[straggler]") {
  // 40 steps, windows of 10. Rank 0's backward goes from 40 to 100 ms for the last 10 steps; rank 1
  // waits those 60 ms (exposed 10 -> 70). Medians over the run are unchanged (30 of 40 steps are
  // the old ones): relative scores 1. Rank 0 backward individual = 40/100 = 0.4, lost 60 ms >= 4 ms
  // (5% of the 80 ms median step). Rank 1 comm_exposed individual 10/70: rule b.
  const nlohmann::json report = report_of({concat(steady(kHealthy, 30), steady({2, 20, 100, 10, 5, 0, 3}, 10, 30)),
                                           concat(steady(kHealthy, 30), steady({2, 20, 40, 70, 5, 0, 3}, 10, 30))});
  INFO(format_straggler_table(report));
  const auto& backward = report["ranks"][0]["sections"]["backward"];
  CHECK(backward["relative"].get<double>() == Approx(1.0));
  CHECK(backward["individual"].get<double>() == Approx(0.4));
  REQUIRE(report["stragglers"].size() == 1);
  const auto& s = report["stragglers"][0];
  CHECK(s["rank"] == 0);
  CHECK(s["section"] == "backward");
  CHECK(s["score"] == "individual");
  CHECK(s["lost_s"].get<double>() == Approx(0.060));
  REQUIRE(report["not_named"].size() == 1);
  CHECK(report["not_named"][0]["rank"] == 1);
  CHECK(report["not_named"][0]["section"] == "comm_exposed");
  CHECK(report["not_named"][0]["score"] == "individual");
  CHECK(report["not_named"][0]["value"].get<double>() == Approx(10.0 / 70.0));
}

TEST_CASE("straggler: a section that runs on few steps is scored over the steps where it ran", "[straggler]") {
  // A checkpoint every 10th step: rank 0 900 ms, rank 1 500 ms. Medians over the 4 checkpoint steps:
  // 0.9 and 0.5 s (over all steps both would be 0). Relative 0.5/0.9 = 0.556, lost 400 ms x 0.1
  // of the steps = 40 ms a step >= 4 ms. Only 4 runs: no full window of 10, individual null.
  std::vector<StepRecord> rank0, rank1;
  for (int step = 0; step < 40; ++step) {
    Ms a = kHealthy, b = kHealthy;
    if (step % 10 == 9) a[5] = 900, b[5] = 500;
    rank0.push_back(record_of(step, a));
    rank1.push_back(record_of(step, b));
  }
  const nlohmann::json report = report_of({rank0, rank1});
  INFO(format_straggler_table(report));
  const auto& ckpt = report["ranks"][0]["sections"]["checkpoint"];
  CHECK(ckpt["median_s"].get<double>() == Approx(0.9));
  CHECK(ckpt["ran_fraction"].get<double>() == Approx(0.1));
  CHECK(ckpt["individual"].is_null());
  REQUIRE(report["stragglers"].size() == 1);
  CHECK(report["stragglers"][0]["rank"] == 0);
  CHECK(report["stragglers"][0]["section"] == "checkpoint");
  CHECK(report["stragglers"][0]["value"].get<double>() == Approx(5.0 / 9.0));
  CHECK(report["stragglers"][0]["lost_s"].get<double>() == Approx(0.040));
  CHECK(report["not_named"].empty());
  CHECK(report["waited_for"].is_null());  // equal exposed communication
}

TEST_CASE("straggler: one rank alone has no relative stragglers, options are validated", "[straggler]") {
  const nlohmann::json report = report_of({steady(kHealthy, 20)});
  CHECK(report["stragglers"].empty());
  CHECK(report["waited_for"].is_null());
  StragglerOptions bad;
  bad.threshold = 1.5;
  CHECK_THROWS_AS(bad.validate(), UsageError);
  bad = {};
  bad.window = 1;
  CHECK_THROWS_AS(bad.validate(), UsageError);
  // A profile survives the trip through a collective's doubles.
  const RankProfile p = profile_of(3, samples_of(steady({2, 20, 40, 10, 5, 7, 3}, 25)), 10);
  const RankProfile q = unflatten(flatten(p).data());
  CHECK(q.rank == 3);
  CHECK(q.steps == 25);
  CHECK(q.median_step_s == Approx(p.median_step_s));
  CHECK(q.sections[5].median_s == Approx(0.007));
  CHECK(q.sections[6].windows == 2);
}

TEST_CASE("straggler: a run folder's step logs, with a partial last line and a non-step record", "[straggler]") {
  const std::string dir = test::temp_dir("straggler_run");
  const RunIdentity id{"cfg", "snap", "test", ""};
  const Ms slow_data = {62, 20, 40, 10, 5, 0, 3}, waiting = {2, 20, 40, 70, 5, 0, 3};
  {
    std::ofstream rank0(dir + "/steps.rank0.jsonl");
    rank0 << record_of(3, {500, 20, 40, 70, 5, 0, 3}).to_json(0, id).dump() << "\n";  // replaced by the rerun below
    for (const StepRecord& r : steady(waiting, 12)) rank0 << r.to_json(0, id).dump() << "\n";
    rank0 << R"({"event": "note", "rank": 0})" << "\n";
    std::ofstream rank1(dir + "/steps.rank1.jsonl");
    for (const StepRecord& r : steady(slow_data, 12)) rank1 << r.to_json(1, id).dump() << "\n";
    rank1 << R"({"step": 12, "rank": 1, "data_s": 0.06)";  // still being written
  }
  const RunSamples run = read_run_samples(dir);
  REQUIRE(run.ranks == std::vector<int>{0, 1});
  CHECK(run.samples[0].size() == 12);
  CHECK(run.samples[1].size() == 12);
  CHECK(run.samples[0][3].section_s[0] == Approx(0.002));  // the last record of step 3 won
  CHECK(run.samples[1][5].section_s[6] == Approx(0.003));  // "other" = step_s minus the six
  CHECK(run.skipped_lines == 1);
  CHECK(run.skipped_records == 1);

  StragglerOptions options;
  options.window = 5;
  const nlohmann::json report = straggler_report_from_run_dir(dir, options).to_json();
  INFO(format_straggler_table(report));
  CHECK(report["skipped_lines"] == 1);
  CHECK(report["skipped_records"] == 1);
  REQUIRE(report["stragglers"].size() == 1);
  CHECK(report["stragglers"][0]["rank"] == 1);
  CHECK(report["stragglers"][0]["section"] == "data");
  const std::string table = format_straggler_table(report);
  CHECK(table.find("straggler: rank 1 data: relative 0.03") != std::string::npos);
  CHECK(table.find("0.03/1.00*") != std::string::npos);  // rank 1's data cell, marked
  CHECK(table.find("waited for at the gradient reduction: rank 1") != std::string::npos);

  CHECK_THROWS_AS(straggler_report_from_run_dir(test::temp_dir("straggler_empty"), options), IoError);
}
