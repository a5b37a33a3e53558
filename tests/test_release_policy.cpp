// release-gate's policy, rubric and registry (release_policy.hpp, release_evidence.hpp,
// release_registry.hpp) on small hand-made evaluations and files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/decision/evidence.hpp"
#include "shardtrain/decision/policy.hpp"
#include "shardtrain/decision/registry.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "test_support.hpp"

using namespace shardtrain;
namespace fs = std::filesystem;

namespace {

// A run summary as the trainer writes it (every field; the rest at their defaults) of `world`
// ranks with its replica checks: the evidence reads it through read_run_summary.
nlohmann::json run_summary_json(int world, int every, std::int64_t checks) {
  RunSummary s;
  s.world_size = world;
  s.replica_checks = {every, checks};
  return json_fields::write(s);
}

std::string write_policy(const std::string& dir, const nlohmann::json& j) {
  const std::string path = dir + "/policy.json";
  write_json_file(path, j);
  return path;
}

nlohmann::json policy_json() {
  return {{"format", "shardtrain-release-policy"},
          {"version", "7.1"},
          {"thresholds", {{"max_loss_rise", 0.02}, {"max_slice_regression", 0.05}, {"max_ece", 0.05}, {"max_latency_ratio", 2.0}}},
          {"rubric",
           {{"min_score", 0.8},
            {"items",
             {{{"name", "kill_resume"}, {"weight", 2}, {"required", true}},
              {{"name", "efficiency_report"}, {"weight", 1}},
              {{"name", "replica_checks"}, {"weight", 1}},
              {{"name", "deterministic_twin"}, {"weight", 1}}}}}},
          {"utility",
           {{"value_per_nat_token", 1e-6}, {"served_tokens_per_day", 1e8}, {"cost_per_ms_p99_day", 1},
            {"bad_release_cost", 1000}, {"horizon_days", 30}, {"regret_bound", 0.05}}}};
}

// A minimal evaluation: overall loss, one slice, ECE, median latency and the checkpoint's cutoff.
CheckpointEvaluation evaluation(double loss, double slice_loss, double slice_lower, double ece, double p50,
                                const std::string& trained_cutoff) {
  CheckpointEvaluation e;
  e.kind = "checkpoint";
  e.holdout.cutoff = "2024-01-10T00:00:00Z";
  e.holdout.selection_snapshot_id = "abc";
  e.checkpoint.data_cutoff = trained_cutoff;
  e.latency.ms_per_sequence_p50 = p50;
  e.scores.loss = loss;
  e.scores.calibration.ece = ece;
  SliceScore slice;
  slice.key = "owner=a";
  slice.loss = slice_loss;
  slice.lower = slice_lower;
  e.scores.slices = {slice};
  return e;
}

std::vector<std::string> failed(const std::vector<CheckResult>& checks) {
  std::vector<std::string> names;
  for (const auto& c : checks)
    if (!c.passed) names.push_back(c.name);
  return names;
}

}  // namespace

TEST_CASE("release policy: read, versioned and hashed, bad files named", "[release]") {
  const std::string dir = test::temp_dir("policy");
  const ReleasePolicy p = read_release_policy(write_policy(dir, policy_json()));
  CHECK(p.version == "7.1");
  CHECK(p.sha256.size() == 64);
  CHECK(p.rubric.size() == 4);
  CHECK(p.rubric[0].required);
  auto bad = policy_json();
  bad["thresholds"].erase("max_ece");
  CHECK_THROWS_WITH(read_release_policy(write_policy(dir, bad)), Catch::Contains("max_ece"));
  bad = policy_json();
  bad.erase("utility");
  CHECK_THROWS_WITH(read_release_policy(write_policy(dir, bad)), Catch::Contains("has no field /utility"));
  CHECK(p.utility.horizon_days == 30);
  CHECK(p.to_json()["utility"]["regret_bound"] == 0.05);
  bad = policy_json();
  bad["format"] = "something-else";
  CHECK_THROWS_AS(read_release_policy(write_policy(dir, bad)), UsageError);
  CHECK_THROWS_AS(read_release_policy(dir + "/missing.json"), IoError);
}

TEST_CASE("release policy: each threshold fails by its own name", "[release]") {
  const ReleasePolicy p = read_release_policy(write_policy(test::temp_dir("policy2"), policy_json()));
  const auto base = evaluation(2.00, 2.0, 1.9, 0.01, 10, "2024-01-01T00:00:00Z");
  CHECK(failed(compare_with_baseline(p, evaluation(2.01, 2.0, 1.95, 0.04, 19, "2024-01-01T00:00:00Z"), base)).empty());
  CHECK(failed(compare_with_baseline(p, evaluation(2.03, 2.0, 1.95, 0.01, 10, "2024-01-01T00:00:00Z"), base)) ==
        std::vector<std::string>{"loss_rise"});
  // Slice lower bound 2.06 > 2.0 + 0.05: regressed beyond its interval; 2.04 is within.
  CHECK(failed(compare_with_baseline(p, evaluation(2.0, 2.3, 2.06, 0.01, 10, "2024-01-01T00:00:00Z"), base)) ==
        std::vector<std::string>{"slice_regression:owner=a"});
  CHECK(failed(compare_with_baseline(p, evaluation(2.0, 2.3, 2.04, 0.01, 10, "2024-01-01T00:00:00Z"), base)).empty());
  CHECK(failed(compare_with_baseline(p, evaluation(2.0, 2.0, 1.9, 0.06, 10, "2024-01-01T00:00:00Z"), base)) ==
        std::vector<std::string>{"ece"});
  CHECK(failed(compare_with_baseline(p, evaluation(2.0, 2.0, 1.9, 0.01, 21, "2024-01-01T00:00:00Z"), base)) ==
        std::vector<std::string>{"latency"});
  CHECK(failed(compare_with_baseline(p, evaluation(2.0, 2.0, 1.9, 0.01, 10, "2024-02-01T00:00:00Z"), base)) ==
        std::vector<std::string>{"trained_past_cutoff"});
  CHECK(failed(compare_with_baseline(p, evaluation(2.0, 2.0, 1.9, 0.01, 10, ""), base)) ==
        std::vector<std::string>{"trained_past_cutoff"});
  auto other = base;
  other.holdout.selection_snapshot_id = "def";
  CHECK_THROWS_WITH(compare_with_baseline(p, base, other), Catch::Contains("holdout_mismatch"));
  auto ngram = base;
  ngram.kind = "ngram";
  const auto checks = compare_with_baseline(p, evaluation(2.0, 2.0, 1.9, 0.01, 1000, "2024-01-01T00:00:00Z"), ngram);
  CHECK(failed(checks).empty());  // an n-gram's latency is not comparable
}

TEST_CASE("release rubric: weights, the 80% bar and required items", "[release]") {
  const std::string dir = test::temp_dir("rubric");
  const ReleasePolicy p = read_release_policy(write_policy(dir, policy_json()));
  fs::create_directories(dir + "/run/evidence/scaling");
  write_json_file(dir + "/run/evidence/kill-resume.json", {{"proof", "holds"}});
  const nlohmann::json w1 = {{"world_size", 1}, {"efficiency", 1.0}}, w2 = {{"world_size", 2}, {"efficiency", 0.9}};
  write_json_file(dir + "/run/evidence/scaling/report.json", {{"efficiency_available", true}, {"points", {w1, w2}}});
  write_json_file(dir + "/run/summary.json", run_summary_json(2, 5, 4));
  write_json_file(dir + "/twin.json", {{"verdict", "DIFFERENT"}});
  // 2 + 1 + 1 of 5 = 0.8 with the twin failing: promotes.
  auto evidence = collect_evidence(p, dir + "/run", {{"deterministic_twin", dir + "/twin.json"}}, "snap");
  RubricScore score;
  CHECK(failed(score_rubric(p, evidence, &score)).empty());
  CHECK(score.score == Approx(0.8));
  // Without the kill-and-resume proof: score 0.4 and the required item named.
  fs::remove(dir + "/run/evidence/kill-resume.json");
  evidence = collect_evidence(p, dir + "/run", {}, "snap");
  CHECK(failed(score_rubric(p, evidence, &score)) == std::vector<std::string>{"rubric", "evidence:kill_resume"});
  CHECK_THROWS_AS(collect_evidence(p, dir + "/run", {{"no_such_item", "x"}}, "snap"), UsageError);
}

TEST_CASE("release evidence: an E(W) needs a W > 1 point, replica checks need two replicas", "[release]") {
  const std::string dir = test::temp_dir("evidence-rules");
  nlohmann::json with_data = policy_json();  // every evidence item the rules know
  with_data["rubric"]["items"].push_back({{"name", "no_skipped_data"}, {"weight", 1}});
  const ReleasePolicy p = read_release_policy(write_policy(dir, with_data));
  auto item = [&](const std::string& name, const nlohmann::json& file) {
    write_json_file(dir + "/" + name + ".json", file);
    for (const auto& e : collect_evidence(p, dir, {{name, dir + "/" + name + ".json"}}, "snap"))
      if (e.item == name) return e;
    FAIL("no item " << name);
    return EvidenceResult{};
  };
  const nlohmann::json w1 = {{"world_size", 1}, {"efficiency", 1.0}};
  const nlohmann::json w2 = {{"world_size", 2}, {"efficiency", 0.9}, {"oversubscribed", true}};
  // The W=1 run alone: a base but no scaling measured; no W=1 run: no E(W) at all.
  CHECK_FALSE(item("efficiency_report", {{"efficiency_available", true}, {"points", {w1}}}).passed);
  CHECK_FALSE(item("efficiency_report", {{"efficiency_available", false}, {"points", {w2}}}).passed);
  const EvidenceResult e = item("efficiency_report", {{"efficiency_available", true}, {"points", {w1, w2}}});
  CHECK(e.passed);
  CHECK_THAT(e.detail, Catch::Contains("1 oversubscribed"));
  // One rank has no replica to compare: its checks prove nothing.
  CHECK_FALSE(item("replica_checks", run_summary_json(1, 5, 4)).passed);
  CHECK_FALSE(item("replica_checks", run_summary_json(2, 0, 0)).passed);
  CHECK(item("replica_checks", run_summary_json(2, 5, 4)).passed);
  // A file that is not a whole run summary fails the item, naming the first missing field.
  const EvidenceResult partial = item("replica_checks", {{"world_size", 2}, {"replica_checks", {{"every", 5}, {"checks", 4}}}});
  CHECK_FALSE(partial.passed);
  CHECK_THAT(partial.detail, Catch::Contains("unreadable") && Catch::Contains("the run summary"));
  // data-prep's summary: no rejected line, and the evaluated dataset's snapshot.
  data::DataPrepResult prep;
  prep.snapshot_id = "snap";
  CHECK(item("no_skipped_data", prep.to_json()).passed);
  prep.rejects = 3;
  prep.rejects_by_class["bad_json"] = 3;
  const EvidenceResult rejected = item("no_skipped_data", prep.to_json());
  CHECK_FALSE(rejected.passed);
  CHECK_THAT(rejected.detail, Catch::Contains("3 rejected input lines"));
  prep.rejects = 0;
  prep.rejects_by_class.clear();
  prep.snapshot_id = "other";
  CHECK_THAT(item("no_skipped_data", prep.to_json()).detail, Catch::Contains("is not the evaluated dataset's"));
}

TEST_CASE("release registry: records, pointer and history", "[release]") {
  const std::string dir = test::temp_dir("registry") + "/reg";
  const ReleaseRegistry r(dir);
  CHECK_FALSE(r.last_known_good());
  ReleaseRecord record;
  record.promote = true;
  record.artifact.folder = "/x/step_1";
  record.artifact.manifest_sha256 = "abcdef0123456789";
  const std::string path = r.write_record(record);
  r.promote(path, record);
  const auto lkg = r.last_known_good();
  REQUIRE(lkg);
  CHECK(lkg->record_path == path);
  CHECK(r.history().size() == 1);
  std::ofstream(dir + "/records/partial.json.tmp") << "{\"half";  // a temporary is never listed
  CHECK(r.history().size() == 1);
  CHECK_THROWS_AS(r.baseline("nope"), UsageError);
  CHECK_THROWS_AS(r.baseline_path("../evil", ".json"), UsageError);
  write_json_file(dir + "/last-known-good", {{"record", "records/gone.json"}});
  CHECK_THROWS_WITH(r.last_known_good(), Catch::Contains("gone.json"));
}
