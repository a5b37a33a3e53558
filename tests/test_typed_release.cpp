// Typed results of the release layer (docs/ARCHITECTURE.md): every struct that release-gate reads
// from or writes to a file has one to_json/from_json pair; a populated value survives the round
// trip through the JSON text unchanged, and a document missing a field is refused naming the file
// and that field.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <limits>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/decision/baseline.hpp"
#include "shardtrain/releaseeval/checkpoint_evaluation.hpp"
#include "shardtrain/decision/record.hpp"
#include "shardtrain/decision/registry.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

JsonFile as_file(const nlohmann::json& j) { return JsonFile::parse(j.dump(), "typed.json", "the test document"); }

template <typename T>
T round_trip(const T& x) {
  return json_fields::read_value<T>(as_file(json_fields::write_value(x)), "");  // by fields() or to_json/from_json
}

// x's JSON without the field at `pointer` must be refused, the message naming the file and the field.
template <typename T>
void refuses_without(const T& x, const std::string& pointer) {
  nlohmann::json j = json_fields::write_value(x);
  const nlohmann::json::json_pointer p(pointer);
  REQUIRE(j.contains(p));
  j[p.parent_pointer()].erase(p.back());
  INFO(pointer);
  CHECK_THROWS_WITH(json_fields::read_value<T>(as_file(j), ""),
                    Catch::Contains("typed.json") && Catch::Contains("has no field " + pointer));
}

ReliabilityBin bin(double lower, std::uint64_t count) {
  ReliabilityBin b;
  b.lower = lower;
  b.upper = lower + 0.5;
  b.count = count;
  if (count) b.mean_confidence = lower + 0.25, b.accuracy = 0.375;
  return b;
}

HoldoutSummary scores() {
  HoldoutSummary s;
  s.loss = 2.6133918762207031;
  s.perplexity = 13.647;
  s.tokens = 8192;
  s.sequences = 32;
  s.interval = {2.5, 2.7, 0.9, 300, 0xfedcba9876543210ULL};
  s.calibration.bins = 2;
  s.calibration.positions = 8192;
  s.calibration.ece = 0.031;
  s.calibration.brier = 0.81;
  s.calibration.top1_accuracy = 0.25;
  s.calibration.top5_accuracy = 0.5;
  s.calibration.reliability = {bin(0, 8192), bin(0.5, 0)};
  SliceScore a{"owner=alice", "owner", "alice", 2.5, 12.18, 4096, 16, 2.4, 2.6};
  SliceScore v{"version=2", "version", "2", 2.75, 15.6, 4096, 17, 2.65, 2.85};
  s.slices = {a, v};
  s.worst_slice = "version=2";
  s.slices_worse_than_mean = {"version=2"};
  s.per_sequence = PerSequenceLosses{{0, 3, 7}, {20.5, 19.25, 21}, {8, 8, 8}};
  return s;
}

HoldoutIdentity holdout() {
  return {"/data/corpus.h5", "snap-data", "snap-selection", "2024-01-10T00:00:00Z", 64, 32, 30, 12};
}

CheckpointEvaluation checkpoint_evaluation() {
  CheckpointEvaluation e;
  e.kind = kCheckpointEvaluation;
  e.holdout = holdout();
  e.scores = scores();
  e.checkpoint.folder = "/runs/r/checkpoints/step_80";
  e.checkpoint.step = 80;
  e.checkpoint.manifest_sha256 = std::string(64, 'a');
  e.checkpoint.files = {{"rank0.h5", std::string(64, 'b'), 123456}, {"index.h5", std::string(64, 'c'), 789}};
  e.checkpoint.model = {{"d_model", 64}, {"layers", 2}};
  e.checkpoint.config = {{"lr", 0.001}, {"steps", 80}};
  e.checkpoint.data_snapshot_id = "snap-train";
  e.checkpoint.data_cutoff = "2024-01-09T00:00:00Z";
  e.checkpoint.code_version = "v1.2-3-gabc";
  e.latency = {4, 20, 2, 0.17, 4.7, 51234.5};
  e.training = TrainingFigures{"/runs/r/summary.json", 1e5, 0.93, std::nullopt, 2};
  e.seconds = 3.25;
  e.evaluated_tokens_per_s = 2520.6;
  return e;
}

CheckpointEvaluation ngram_evaluation() {
  CheckpointEvaluation e;
  e.kind = kNgramEvaluation;
  e.holdout = holdout();
  e.scores = scores();
  e.order = 2;
  e.counted_tokens = 99999;
  return e;
}

ReleasePolicy policy() {
  ReleasePolicy p;
  p.path = "scripts/release-policy.json";
  p.version = "3.1";
  p.sha256 = std::string(64, 'd');
  p.max_loss_rise = 0.02;
  p.max_slice_regression = 0.05;
  p.max_ece = 0.06;
  p.max_latency_ratio = 2.5;
  p.min_score = 0.8;
  p.rubric = {{"kill_resume", 2, true}, {"efficiency_report", 1, false}};
  p.utility = {1e-6, 1e8, 1.5, 1000, 30, 0.05};
  return p;
}

UtilityEstimate utility() {
  UtilityEstimate u;
  u.model = policy().utility;
  u.fallback = "last-known-good";
  u.candidate_loss = 2.613409;
  u.fallback_loss = 2.621162;
  u.loss_saved = 0.007753;
  u.loss_saved_lower = 0.001;
  u.loss_saved_upper = 0.014;
  u.sequences = 32;
  u.tokens = 8192;
  u.resamples = 1000;
  u.seed = 0x1234567890abcdefULL;
  u.level = 0.95;
  u.latency_applicable = true;
  u.candidate_p99_ms = 4.7;
  u.fallback_p99_ms = 4.2;
  u.latency_delta_ms = 0.5;
  u.value_over_horizon = 23.259;
  u.latency_cost_over_horizon = 22.5;
  u.break_even_loss_saved = 0.0075;
  u.regret_resamples = 3;
  u.regret_probability = 0.003;
  u.expected_utility = -2.241;
  u.lower = -20;
  u.upper = 20;
  return u;
}

CostTable costs() {
  const nlohmann::json j = {{"format", "shardtrain-costs"},
                            {"version", 1},
                            {"source", "local"},
                            {"storage_bytes", {{"dataset", 1000}, {"checkpoints", 5000}, {"records", 300}, {"total", 6300}}},
                            {"preprocessing_s", 1.5},
                            {"stages", {{{"stage", "train"}, {"job_id", "12"}, {"state", "COMPLETED"}, {"cpus", 2},
                                         {"runs", 1}, {"run_s", 30}, {"compute_core_s", 60}, {"queue_wait_s", 0}}}}};
  return CostTable::from_json(j, "runs/r/costs.json");
}

ReleaseRecord record() {
  ReleaseRecord r;
  r.promote = true;
  r.reasons = {"every check passed"};
  r.checks = {{"trained_past_cutoff", true, true, std::string("2024-01-09T00:00:00Z"), std::string("2024-01-10T00:00:00Z"), ""},
              {"loss_rise", true, true, -0.0078, 0.02, ""},
              {"latency", true, false, std::monostate{}, 2.5, "not applicable: an n-gram"},
              {"evidence:kill_resume", false, true, std::monostate{}, std::monostate{}, "required evidence is missing"}};
  r.data = {"/data/corpus.h5", "snap-data", "snap-selection", "2024-01-10T00:00:00Z", "snap-train", "2024-01-09T00:00:00Z"};
  r.transformation.created_by = "data-prep v1";
  r.transformation.tokenizer = "bytes";
  r.transformation.vocab = 257;
  r.transformation.separator_token = 256;
  r.transformation.token_bits = 16;
  r.transformation.data_prep = {{"rejects", {{"count", 0}}}};
  r.transformation.sources = {{"corpus.jsonl", std::string(64, 'e'), 4242}};
  const CheckpointEvaluation c = checkpoint_evaluation();
  r.artifact = {c.checkpoint.folder, c.checkpoint.step, c.checkpoint.manifest_sha256, c.checkpoint.files};
  r.model = c.checkpoint.model;
  r.run_config = c.checkpoint.config;
  r.code_version = c.checkpoint.code_version;
  r.candidate = c;
  r.baseline_evaluation = ngram_evaluation();
  r.rubric.score = 0.8;
  r.rubric.min_score = 0.8;
  r.rubric.items = {{{"kill_resume", "runs/r/evidence/kill-resume.json", true, true, "proof holds"}, 2, true}};
  r.utility = utility();
  r.costs = costs();
  r.policy = policy();
  r.baseline = {"bigram", "ngram", std::nullopt, std::nullopt, "reg/baselines/bigram.json"};
  r.previous_last_known_good = "records/20240101T000000.000000Z-aaaaaaaaaaaa-1.json";
  r.in_service = {"candidate", c.checkpoint.folder, std::nullopt, "records/x.json", std::nullopt};
  r.dry_run = false;
  r.release_gate_version = "v1.2-3-gabc";
  r.started = "2024-02-01T10:00:00Z";
  r.decided = "2024-02-01T10:01:00Z";
  r.record_path = "records/x.json";
  return r;
}

}  // namespace

TEST_CASE("typed release: the evaluation's parts survive their JSON round trip", "[typed][release]") {
  const HoldoutSummary s = scores();
  CHECK(round_trip(s.calibration.reliability[0]) == s.calibration.reliability[0]);
  CHECK(round_trip(s.calibration.reliability[1]) == s.calibration.reliability[1]);  // an empty bin: nulls
  CHECK(json_fields::write(s.calibration.reliability[1])["accuracy"].is_null());
  CHECK(round_trip(s.calibration) == s.calibration);
  CHECK(round_trip(s.slices[0]) == s.slices[0]);
  CHECK(round_trip(s.interval) == s.interval);
  CHECK(round_trip(*s.per_sequence) == *s.per_sequence);
  CHECK(round_trip(s) == s);
  HoldoutSummary older = s;  // an evaluation recorded before per-sequence losses
  older.per_sequence.reset();
  CHECK_FALSE(older.to_json().contains("per_sequence"));
  CHECK(round_trip(older) == older);
  CHECK(round_trip(holdout()) == holdout());
  const CheckpointEvaluation c = checkpoint_evaluation();
  CHECK(round_trip(c.checkpoint.files[0]) == c.checkpoint.files[0]);
  CHECK(round_trip(c.checkpoint) == c.checkpoint);
  CHECK(round_trip(c.latency) == c.latency);
  CHECK(round_trip(*c.training) == *c.training);
  CHECK(json_fields::write(*c.training)["mfu"].is_null());
}

TEST_CASE("typed release: a checkpoint's and an n-gram's evaluation survive the round trip", "[typed][release]") {
  const CheckpointEvaluation c = checkpoint_evaluation();
  CHECK(round_trip(c) == c);
  const nlohmann::json j = c.to_json();  // evaluation.json's keys and number types
  CHECK(j["kind"] == "checkpoint");
  CHECK(j["scores"]["tokens"].is_number_float());
  CHECK(j["holdout"]["samples"].is_number_unsigned());
  CHECK(j["scores"]["interval"]["seed"] == 0xfedcba9876543210ULL);
  CHECK_FALSE(j.contains("order"));
  CheckpointEvaluation untrained = c;
  untrained.training.reset();
  CHECK(untrained.to_json()["training"].is_null());
  CHECK(round_trip(untrained) == untrained);
  const CheckpointEvaluation n = ngram_evaluation();
  CHECK(round_trip(n) == n);
  CHECK_FALSE(n.to_json().contains("latency"));
  CHECK(n.to_json()["counted_tokens"] == 99999);
  nlohmann::json bad = n.to_json();
  bad["kind"] = "oracle";
  CHECK_THROWS_WITH(CheckpointEvaluation::from_json(as_file(bad)), Catch::Contains("/kind"));
  bad = c.to_json();
  bad["scores"]["sequences"] = "many";
  CHECK_THROWS_WITH(CheckpointEvaluation::from_json(as_file(bad)), Catch::Contains("/scores/sequences is not an integer"));
}

TEST_CASE("typed release: a missing field is named by its pointer", "[typed][release]") {
  refuses_without(checkpoint_evaluation(), "/holdout/cutoff");
  refuses_without(checkpoint_evaluation(), "/scores/calibration/reliability/1/count");
  refuses_without(checkpoint_evaluation(), "/scores/slices/1/lower");
  refuses_without(checkpoint_evaluation(), "/checkpoint/files/0/sha256");
  refuses_without(checkpoint_evaluation(), "/latency/ms_per_sequence_p50");
  refuses_without(checkpoint_evaluation(), "/training/summary");
  refuses_without(checkpoint_evaluation(), "/scores/per_sequence/loss_sums");
  refuses_without(ngram_evaluation(), "/order");
  refuses_without(ngram_evaluation(), "/scores/interval/seed");
  refuses_without(scores(), "/worst_slice");
  refuses_without(scores().calibration, "/ece");
  refuses_without(holdout(), "/documents");
  refuses_without(checkpoint_evaluation().latency, "/threads");
  refuses_without(utility(), "/bootstrap/resamples");
  refuses_without(utility(), "/break_even_loss_saved");
  refuses_without(policy(), "/thresholds/max_ece");
  refuses_without(policy(), "/rubric/items/1/weight");
  refuses_without(record().checks[0], "/limit");
  refuses_without(record().rubric, "/items/0/detail");
  refuses_without(record(), "/decision");
  refuses_without(record(), "/scores/baseline/holdout/seq_len");
  refuses_without(record(), "/utility/latency/delta_ms");
  refuses_without(record(), "/transformation/sources/0/bytes");
  refuses_without(record(), "/artifact/manifest_sha256");
  refuses_without(record(), "/in_service/checkpoint");
  refuses_without(record(), "/previous_last_known_good");
}

TEST_CASE("typed release: policy, utility, checks and rubric survive the round trip", "[typed][release]") {
  CHECK(round_trip(policy()) == policy());
  ReleasePolicy before_utility = policy();  // a record of format_version 1 kept no utility model
  nlohmann::json j = before_utility.to_json();
  j.erase("utility");
  CHECK(ReleasePolicy::from_json(as_file(j), "").utility == UtilityModel{});
  CHECK(round_trip(utility()) == utility());
  UtilityEstimate free = utility();  // v N = 0: break-even infinite, null in JSON
  free.break_even_loss_saved = std::numeric_limits<double>::infinity();
  CHECK(free.to_json()["break_even_loss_saved"].is_null());
  CHECK(round_trip(free) == free);
  for (const CheckResult& c : record().checks) CHECK(round_trip(c) == c);
  CHECK(record().checks[0].to_json()["value"] == "2024-01-09T00:00:00Z");
  CHECK(record().checks[2].to_json()["value"].is_null());
  CHECK(record().checks[1].to_json()["limit"] == 0.02);
  const EvidenceResult e = record().rubric.items[0].evidence;
  CHECK(round_trip(e) == e);
  CHECK(round_trip(record().rubric.items[0]) == record().rubric.items[0]);
  CHECK(round_trip(record().rubric) == record().rubric);
  // UtilityModel read from JSON in memory; CostTable reads its file's own layout (costs.json).
  CHECK(json_fields::read_json<UtilityModel>(policy().utility.to_json(), "p.json", "the policy") == policy().utility);
  CHECK(CostTable::from_json(costs().to_json(), costs().path) == costs());
}

TEST_CASE("typed release: the release record, a baseline and last-known-good survive the round trip", "[typed][release]") {
  const ReleaseRecord r = record();
  CHECK(round_trip(r.data) == r.data);
  CHECK(round_trip(r.transformation.sources[0]) == r.transformation.sources[0]);
  CHECK(round_trip(r.transformation) == r.transformation);
  CHECK(round_trip(r.artifact) == r.artifact);
  CHECK(round_trip(r.baseline) == r.baseline);
  CHECK(round_trip(r.in_service) == r.in_service);
  CHECK(round_trip(r) == r);
  const nlohmann::json j = r.to_json();
  CHECK(j["decision"] == "promote");
  CHECK(j["format"] == "shardtrain-release-record");
  CHECK(j["format_version"] == 2);
  CHECK(j["scores"]["baseline"]["kind"] == "ngram");
  CHECK(j["costs"]["path"] == "runs/r/costs.json");
  CHECK_FALSE(j["baseline"].contains("record"));
  CHECK_FALSE(j["in_service"].contains("kind"));

  // A reject against a named baseline, without costs, a previous release or a record path yet.
  ReleaseRecord reject = r;
  reject.promote = false;
  reject.costs.reset();
  reject.previous_last_known_good.reset();
  reject.in_service = {"bigram", std::nullopt, "ngram", std::nullopt, "reg/baselines/bigram.json"};
  reject.record_path.clear();
  const nlohmann::json rj = reject.to_json();
  CHECK(rj["costs"].is_null());
  CHECK(rj["previous_last_known_good"].is_null());
  CHECK(rj["in_service"]["checkpoint"].is_null());
  CHECK_FALSE(rj.contains("record_path"));
  CHECK(round_trip(reject) == reject);
  // A record of format_version 1: no utility.
  ReleaseRecord first = r;
  first.format_version = 1;
  first.utility.reset();
  CHECK_FALSE(first.to_json().contains("utility"));
  CHECK(round_trip(first) == first);
  nlohmann::json other = j;
  other["format"] = "shardtrain-release-baseline";
  CHECK_THROWS_WITH(ReleaseRecord::from_json(as_file(other)), Catch::Contains("not a release record"));

  BaselineRecord b;
  b.name = "bigram";
  b.order = 2;
  b.model_file = "bigram.h5";
  b.created = "2024-02-01T09:00:00Z";
  b.code_version = "v1.2-3-gabc";
  b.evaluation = ngram_evaluation();
  CHECK(round_trip(b) == b);
  CHECK(b.to_json()["format"] == "shardtrain-release-baseline");
  refuses_without(b, "/model_file");
  refuses_without(b, "/evaluation/counted_tokens");

  const LastKnownGood p{"records/x.json", "/runs/r/checkpoints/step_80", std::string(64, 'a'), "2024-02-01T10:01:00Z", std::nullopt, std::nullopt};
  CHECK(round_trip(p) == p);
  refuses_without(p, "/manifest_sha256");
}

// ---- the release over time (issue 36): monitoring and rollback records -------------------------

namespace {

MonitoringRecord monitoring_record() {
  MonitoringRecord m;
  const ReleaseRecord r = record();
  m.release = {{"records/20240201T100100.000000Z-aaaaaaaaaaaa-1.json", r.artifact.folder, r.artifact.manifest_sha256},
               r.artifact.step, "snap-train", "2024-01-09T00:00:00Z", "2024-01-10T00:00:00Z", "3.1", std::string(64, 'd')};
  m.since = "2024-01-20T00:00:00Z";
  m.matured = checkpoint_evaluation();
  m.matured.scores.per_sequence.reset();  // a monitoring record keeps none
  m.release_time = scores();
  m.release_time.per_sequence.reset();
  m.input_quality = {0.0123, "/data/corpus-1.h5", "2024-01-09T00:00:00Z", 40, 40000, 12, 12000, 3, 24};
  m.checks = {{"matured_loss", true, true, 2.55, 2.7, ""},
              {"slice_regression:owner=bob", false, true, 3.1, 2.75, "owner=bob matured at ..."},
              {"slice_regression:owner=carol", true, false, 2.4, std::monostate{}, "no release-time estimate"},
              {"drift", true, true, 0.0123, 0.1, ""}};
  m.verdict = kVerdictRolledBack;
  m.policy_path = "scripts/release-policy.json";
  m.policy_version = "3.1";
  m.policy_sha256 = std::string(64, 'd');
  m.run_dir = "/work/cycles/cycle-3";
  m.monitored = "2024-02-02T10:00:00Z";
  m.release_gate_version = "v1.2-3-gabc";
  m.record_path = "monitoring/20240202T100000.000000Z-aaaaaaaaaaaa-7.json";
  return m;
}

RollbackRecord rollback_record() {
  const MonitoringRecord m = monitoring_record();
  RollbackRecord b;
  b.from = m.release.release;
  b.to = ReleaseRef{"records/20240101T000000.000000Z-bbbbbbbbbbbb-1.json", "/runs/c1/checkpoints/step_00000150", std::string(64, 'b')};
  b.to_reason = "the previous known-good of " + b.from.record;
  b.monitoring_record = m.record_path;
  b.reasons = {"slice_regression:owner=bob: owner=bob matured at ..."};
  b.evidence = {m.checks[1]};
  b.slices = {"owner=bob"};
  b.policy_version = "3.1";
  b.policy_sha256 = std::string(64, 'd');
  b.review = ReviewNeed::of(30);
  b.run_dir = m.run_dir;
  b.rolled_back = "2024-02-02T10:00:01Z";
  b.release_gate_version = "v1.2-3-gabc";
  b.record_path = "rollbacks/20240202T100001.000000Z-bbbbbbbbbbbb-7.json";
  return b;
}

}  // namespace

TEST_CASE("typed release: a monitoring record and a rollback record survive the round trip", "[typed][release][monitor]") {
  const MonitoringRecord m = monitoring_record();
  CHECK(round_trip(m.release) == m.release);
  CHECK(round_trip(m.input_quality) == m.input_quality);
  CHECK(round_trip(m) == m);
  const nlohmann::json j = m.to_json();
  CHECK(j["format"] == "shardtrain-monitoring-record");
  CHECK(j["verdict"] == "rolled_back");
  CHECK_FALSE(j["matured"]["scores"].contains("per_sequence"));
  CHECK(j["release"]["manifest_sha256"] == m.release.release.manifest_sha256);
  // Without a data-prep summary the input lines are unknown: null, and still a round trip.
  MonitoringRecord unknown = m;
  unknown.input_quality.rejected_records.reset();
  unknown.input_quality.not_yet_available.reset();
  CHECK(unknown.to_json()["input_quality"]["rejected_records"].is_null());
  CHECK(round_trip(unknown) == unknown);
  for (const char* field : {"/release/manifest_sha256", "/since", "/matured/scores/slices", "/release_time/interval",
                            "/input_quality/drift_jsd_bits", "/checks", "/verdict", "/policy/sha256"})
    refuses_without(m, field);
  nlohmann::json bad = m.to_json();
  bad["verdict"] = "maybe";
  CHECK_THROWS_WITH(MonitoringRecord::from_json(as_file(bad)), Catch::Contains("/verdict"));
  bad = m.to_json();
  bad["format"] = "shardtrain-release-record";
  CHECK_THROWS_WITH(MonitoringRecord::from_json(as_file(bad)), Catch::Contains("not a monitoring record"));

  const RollbackRecord b = rollback_record();
  CHECK(round_trip(*b.to) == *b.to);
  CHECK(round_trip(b) == b);
  CHECK(b.to_json()["review"] == nlohmann::json({{"required", true}, {"minutes", 30.0}, {"pending", true}}));
  for (const char* field : {"/from/record", "/to/checkpoint", "/monitoring_record", "/evidence", "/slices", "/review/pending"})
    refuses_without(b, field);

  // Version 2: a baseline put back instead of a release ("to" null).
  RollbackRecord to_baseline = b;
  to_baseline.to.reset();
  to_baseline.to_baseline = ServedBaseline{"ngram-1", "baselines/ngram-1.json", "baselines/ngram-1.h5", std::string(64, 'e')};
  CHECK(round_trip(to_baseline) == to_baseline);
  CHECK(to_baseline.to_json()["to"].is_null());
  CHECK(to_baseline.to_json()["format_version"] == 2);
  CHECK(to_baseline.to_name() == "baseline ngram-1");
  for (const char* field : {"/to_baseline/name", "/to_baseline/sha256"}) refuses_without(to_baseline, field);
  nlohmann::json neither = to_baseline.to_json();
  neither["to_baseline"] = nullptr;
  CHECK_THROWS_WITH(RollbackRecord::from_json(as_file(neither)), Catch::Contains("exactly one"));
  nlohmann::json both = b.to_json();
  both["to_baseline"] = to_baseline.to_json()["to_baseline"];
  CHECK_THROWS_WITH(RollbackRecord::from_json(as_file(both)), Catch::Contains("exactly one"));
  // Version 1 (before baselines could be put back): no "to_baseline"; still read, "to" a release.
  nlohmann::json v1 = b.to_json();
  v1["format_version"] = 1;
  v1.erase("to_baseline");
  const RollbackRecord old = RollbackRecord::from_json(as_file(v1));
  CHECK(old.to == b.to);
  CHECK_FALSE(old.to_baseline);
  nlohmann::json future = b.to_json();
  future["format_version"] = 3;
  CHECK_THROWS_WITH(RollbackRecord::from_json(as_file(future)), Catch::Contains("/format_version"));
}

TEST_CASE("typed release: the policy's rollback rules and review, and a pointer moved by a rollback", "[typed][release][monitor]") {
  ReleasePolicy p = policy();
  p.rollback = RollbackRules{0.01, 0.05, 0.1, std::nullopt};
  p.review = {20, 30};
  CHECK(ReleasePolicy::from_json(as_file(p.to_json()), "") == p);
  // A record's policy from before the monitor: no rollback rules, no review.
  nlohmann::json old = p.to_json();
  old.erase("rollback");
  old.erase("review");
  const ReleasePolicy before = ReleasePolicy::from_json(as_file(old), "");
  CHECK_FALSE(before.rollback);
  CHECK(before.review == ReviewRules{});
  nlohmann::json bad = p.to_json();
  bad["rollback"]["max_drift_jsd"] = -1;
  CHECK_THROWS_WITH(ReleasePolicy::from_json(as_file(bad), ""),
                    "typed.json: the test document field /rollback/max_drift_jsd is -1.0, not >= 0.0");

  ReleaseRecord r = record();
  r.review = ReviewNeed::of(20);
  CHECK(round_trip(r) == r);
  nlohmann::json no_review = r.to_json();
  no_review.erase("review");
  CHECK(ReleaseRecord::from_json(as_file(no_review)).review == ReviewNeed{});

  const LastKnownGood moved{"records/a.json", "/c", std::string(64, 'a'), "2024-02-02T10:00:01Z",
                            "rollbacks/20240202T100001.000000Z-bbbbbbbbbbbb-7.json", std::nullopt};
  CHECK(round_trip(moved) == moved);
  nlohmann::json promoted = moved.to_json();
  promoted.erase("rollback");  // a pointer written before rollbacks existed
  promoted.erase("baseline");
  promoted.erase("format_version");
  CHECK_FALSE(LastKnownGood::from_json(as_file(promoted)).rollback);
  CHECK(LastKnownGood::from_json(as_file(promoted)).record == "records/a.json");

  // A baseline in service: named with its model's sha256, no release.
  LastKnownGood baseline{std::nullopt, std::nullopt, std::nullopt, "2024-02-02T10:00:01Z",
                         "rollbacks/20240202T100001.000000Z-eeeeeeeeeeee-7.json",
                         ServedBaseline{"ngram-1", "baselines/ngram-1.json", "baselines/ngram-1.h5", std::string(64, 'e')}};
  CHECK(round_trip(baseline) == baseline);
  CHECK(baseline.to_json()["record"].is_null());
  CHECK(baseline.to_json()["format_version"] == 2);
  nlohmann::json two = baseline.to_json();
  two["record"] = "records/a.json";
  CHECK_THROWS_WITH(LastKnownGood::from_json(as_file(two)), Catch::Contains("/record must be null"));
  two = baseline.to_json();
  two["rollback"] = nullptr;
  CHECK_THROWS_WITH(LastKnownGood::from_json(as_file(two)), Catch::Contains("only put in service by a rollback"));

  // The policy's fallback baseline: round trip; absent (policies before it) is none.
  ReleasePolicy with_fallback = policy();
  with_fallback.rollback = RollbackRules{0.01, 0.05, 0.1, "ngram-1"};
  CHECK(ReleasePolicy::from_json(as_file(with_fallback.to_json()), "") == with_fallback);
  nlohmann::json no_fallback = with_fallback.to_json();
  no_fallback["rollback"].erase("fallback_baseline");
  CHECK_FALSE(ReleasePolicy::from_json(as_file(no_fallback), "").rollback->fallback_baseline);
  no_fallback["rollback"]["fallback_baseline"] = "";
  CHECK_THROWS_WITH(ReleasePolicy::from_json(as_file(no_fallback), ""), Catch::Contains("fallback_baseline is empty"));
}

TEST_CASE("typed release: a review sign-off survives the round trip, and the registry takes one per decision", "[typed][release][monitor]") {
  const ReviewSignOff s{"rollbacks/20240202T100001.000000Z-bbbbbbbbbbbb-7.json", "on-call", "bob's ingest fixed",
                        "2024-02-02T11:00:00Z", "reviews/x.json"};
  CHECK(round_trip(s) == s);
  for (const char* field : {"/record", "/by", "/signed_off"}) refuses_without(s, field);

  const std::string dir = test::temp_dir("review_sign_off");
  const ReleaseRegistry registry(dir);
  ReleaseRecord needs = record();
  needs.review = ReviewNeed::of(20);
  const std::string a = registry.write_record(needs);
  ReleaseRecord none = record();
  none.review = {};
  const std::string b = registry.write_record(none);
  CHECK_FALSE(registry.signed_off(a));
  const std::string path = registry.sign_off({a, "alice", "", "2024-02-02T11:00:00Z", ""});
  CHECK(path.rfind("reviews/", 0) == 0);
  CHECK(registry.signed_off(a));
  CHECK(registry.reviews().at(0).by == "alice");
  CHECK_THROWS_WITH(registry.sign_off({a, "carol", "", "2024-02-02T12:00:00Z", ""}), Catch::Contains("already signed off by alice"));
  CHECK_THROWS_WITH(registry.sign_off({b, "carol", "", "2024-02-02T12:00:00Z", ""}), Catch::Contains("needs no review"));
  CHECK_THROWS_WITH(registry.sign_off({"records/none.json", "carol", "", "", ""}), Catch::Contains("no release record"));
  std::filesystem::remove_all(dir);
}

// The fuzz seeds of the release formats (issue 50: fuzz/targets/release_record.cpp,
// monitoring_record.cpp, registry_pointer.cpp) are these fixtures as files. Hidden (never in a
// ctest run); rewrite them after a format change with
//   build/tests/shardtrain_tests "[.fuzz-seeds]"
TEST_CASE("fuzz seeds: the release formats' fixtures as files", "[.fuzz-seeds]") {
  const std::string seeds = std::string(SHARDTRAIN_TESTDATA) + "/fuzz";
  auto write = [&](const std::string& file, const nlohmann::json& j) {
    std::filesystem::create_directories(std::filesystem::path(seeds + "/" + file).parent_path());
    std::ofstream(seeds + "/" + file) << j.dump(2) << "\n";
  };
  write("release_record/seed-promote.json", record().to_json());
  ReleaseRecord reject = record();
  reject.promote = false;
  reject.costs.reset();
  reject.previous_last_known_good.reset();
  write("release_record/seed-reject-no-costs.json", reject.to_json());
  write("monitoring_record/seed-rolled-back.json", monitoring_record().to_json());
  write("registry_pointer/seed-release.json",
        LastKnownGood{"records/a.json", "/c", std::string(64, 'a'), "2024-02-02T10:00:01Z",
                      "rollbacks/20240202T100001.000000Z-bbbbbbbbbbbb-7.json", std::nullopt}
            .to_json());
  write("registry_pointer/seed-baseline.json",
        LastKnownGood{std::nullopt, std::nullopt, std::nullopt, "2024-02-02T10:00:01Z",
                      "rollbacks/20240202T100001.000000Z-eeeeeeeeeeee-7.json",
                      ServedBaseline{"ngram-1", "baselines/ngram-1.json", "baselines/ngram-1.h5", std::string(64, 'e')}}
            .to_json());
}
