// The monitor's pure parts (monitor/monitor.hpp, issue 36): the Jensen-Shannon divergence, the
// rollback rules, the rolled-back-slice check of a later decision, the in-service timeline and
// "what was in service at T", the fail-closed refusals of monitor_release before it scores, and
// the rollback to a registered baseline when there is no previous known-good (where it goes, what
// the pointer and history then say, what decide compares the next candidate with).
// Reference values are computed independently: the divergences with Python's math.log2 (the
// one-liner is in each case), the rule outcomes by hand from the intervals written here.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/data/synthetic.hpp"
#include "shardtrain/decision/decision.hpp"
#include "shardtrain/decision/registry.hpp"
#include "shardtrain/decision/registry_history.hpp"
#include "shardtrain/decision/registry_time.hpp"
#include "shardtrain/decision/rollback_rules.hpp"
#include "shardtrain/decision/service_timeline.hpp"
#include "shardtrain/monitor/drift.hpp"
#include "shardtrain/monitor/monitor.hpp"
#include "shardtrain/monitor/rollback_target.hpp"
#include "shardtrain/train/trainer.hpp"
#include "test_support.hpp"

using namespace shardtrain;

namespace {

SliceScore slice(const std::string& key, double loss, double lower, double upper) {
  SliceScore s;
  s.key = key;
  s.kind = key.substr(0, key.find('='));
  s.name = key.substr(key.find('=') + 1);
  s.loss = loss, s.lower = lower, s.upper = upper;
  s.tokens = 100;
  s.units = 4;
  return s;
}

HoldoutSummary summary(double loss, double lower, double upper, std::vector<SliceScore> slices) {
  HoldoutSummary h;
  h.loss = loss;
  h.interval.lower = lower;
  h.interval.upper = upper;
  h.slices = std::move(slices);
  return h;
}

const CheckResult& named(const std::vector<CheckResult>& checks, const std::string& name) {
  for (const auto& c : checks)
    if (c.name == name) return c;
  FAIL("no check " << name);
  return checks.front();
}

ReleaseRecord promoted(const std::string& path, const std::string& checkpoint, bool promote = true) {
  ReleaseRecord r;
  r.promote = promote;
  r.record_path = path;
  r.artifact.folder = checkpoint;
  r.baseline.name = "last-known-good";
  r.candidate.scores = summary(1.0, 0.9, 1.1, {});
  return r;
}

RollbackRecord rollback(const std::string& path, const std::string& from, const std::string& to) {
  RollbackRecord b;
  b.record_path = path;
  b.from.record = from;
  b.to = ReleaseRef{to, "/ck/" + to, ""};
  b.reasons = {"slice_regression:owner=bob: worse"};
  b.slices = {"owner=bob"};
  return b;
}

}  // namespace

TEST_CASE("monitor: Jensen-Shannon divergence in bits", "[release][monitor]") {
  // Python: H = lambda p: -sum(x*math.log2(x) for x in p if x > 0); JSD = H(m) - (H(p) + H(q)) / 2
  CHECK(jensen_shannon_divergence({1, 1}, {1, 0}) == Approx(0.31127812445913283).epsilon(1e-12));
  CHECK(jensen_shannon_divergence({3, 1, 0, 4}, {1, 2, 5, 0}) == Approx(0.625).epsilon(1e-12));
  CHECK(jensen_shannon_divergence({10, 20, 30}, {1, 2, 3}) == Approx(0.0).margin(1e-15));  // counts are normalised
  CHECK(jensen_shannon_divergence({1, 0}, {0, 1}) == Approx(1.0).epsilon(1e-12));         // disjoint: the maximum
  CHECK(jensen_shannon_divergence({1, 0}, {0, 1}) <= 1.0);
  CHECK(jensen_shannon_divergence({2, 7, 1}, {5, 1, 4}) == Approx(jensen_shannon_divergence({5, 1, 4}, {2, 7, 1})));
  CHECK_THROWS_AS(jensen_shannon_divergence({1, 2}, {1, 2, 3}), UsageError);
  CHECK_THROWS_WITH(jensen_shannon_divergence({0, 0}, {1, 2}), Catch::Contains("sums to 0"));
  CHECK_THROWS_WITH(jensen_shannon_divergence({1, -1}, {1, 2}), Catch::Contains("negative"));
}

TEST_CASE("monitor: the rollback rules keep a release whose matured figures stay within its intervals", "[release][monitor]") {
  const RollbackRules rules{0.0, 0.05, 0.1, std::nullopt};
  const HoldoutSummary then = summary(1.0, 0.9, 1.1, {slice("owner=alice", 1.0, 0.9, 1.1), slice("owner=bob", 1.2, 1.1, 1.3)});
  // Matured: overall lower 1.05 <= 1.1 + 0; alice lower 1.15 <= 1.1 + 0.05 (the boundary itself passes);
  // carol only matured now (not applicable); drift 0.1 <= 0.1.
  const HoldoutSummary now = summary(1.12, 1.05, 1.2, {slice("owner=alice", 1.2, 1.15, 1.25), slice("owner=bob", 1.2, 1.1, 1.3),
                                                       slice("owner=carol", 3.0, 2.9, 3.1)});
  const auto checks = rollback_checks(rules, then, now, 0.1);
  REQUIRE(checks.size() == 5);  // matured_loss, three slices, drift
  CHECK_FALSE(must_roll_back(checks));
  CHECK(named(checks, "slice_regression:owner=alice").passed);
  CHECK(std::get<double>(named(checks, "slice_regression:owner=alice").limit) == Approx(1.15));
  CHECK_FALSE(named(checks, "slice_regression:owner=carol").applicable);
  CHECK(named(checks, "slice_regression:owner=carol").passed);
  CHECK(regressed_slices(checks).empty());
}

TEST_CASE("monitor: each rollback rule alone sends a release back", "[release][monitor]") {
  const RollbackRules rules{0.0, 0.05, 0.1, std::nullopt};
  const HoldoutSummary then = summary(1.0, 0.9, 1.1, {slice("owner=alice", 1.0, 0.9, 1.1), slice("owner=bob", 1.0, 0.9, 1.1)});
  SECTION("matured loss beyond the release-time interval") {
    const auto checks = rollback_checks(rules, then, summary(1.3, 1.11, 1.5, then.slices), 0.0);
    CHECK(must_roll_back(checks));
    CHECK_FALSE(named(checks, "matured_loss").passed);
    CHECK(named(checks, "matured_loss").reason.find("1.1100") != std::string::npos);
    CHECK(regressed_slices(checks).empty());
  }
  SECTION("one slice regressed beyond both intervals by more than the bound") {
    const auto checks = rollback_checks(
        rules, then, summary(1.0, 0.9, 1.1, {slice("owner=alice", 1.0, 0.9, 1.1), slice("owner=bob", 1.5, 1.16, 1.8)}), 0.0);
    CHECK(must_roll_back(checks));
    CHECK(named(checks, "matured_loss").passed);
    CHECK_FALSE(named(checks, "slice_regression:owner=bob").passed);
    CHECK(regressed_slices(checks) == std::vector<std::string>{"owner=bob"});
  }
  SECTION("drift above its bound") {
    const auto checks = rollback_checks(rules, then, then, 0.1000001);
    CHECK(must_roll_back(checks));
    CHECK_FALSE(named(checks, "drift").passed);
  }
  SECTION("a looser policy keeps the same figures: the rules, not the data, decide") {
    const auto checks = rollback_checks({1.0, 1.0, 1.0, std::nullopt}, then,
                                        summary(1.3, 1.11, 1.5, {slice("owner=bob", 1.5, 1.16, 1.8)}), 0.5);
    CHECK_FALSE(must_roll_back(checks));
  }
}

TEST_CASE("monitor: after a rollback on a slice, a decision must show the slice back within the rule", "[release][monitor]") {
  const RollbackRecord standing = rollback("rollbacks/20240103T000000.000000Z-b-1.json", "records/r2.json", "records/r1.json");
  const HoldoutSummary release_time = summary(1.0, 0.9, 1.1, {slice("owner=bob", 1.0, 0.9, 1.1)});
  // Still off: lower 1.2 > 1.1 + 0.05.
  auto checks = rolled_back_slice_checks(standing, summary(2, 1.9, 2.1, {slice("owner=bob", 1.3, 1.2, 1.4)}), release_time, 0.05);
  REQUIRE(checks.size() == 1);
  CHECK(checks[0].name == "rolled_back_slice:owner=bob");
  CHECK_FALSE(checks[0].passed);
  CHECK(checks[0].reason.find("cannot promote on this slice") != std::string::npos);
  CHECK(checks[0].reason.find("records/r2.json") != std::string::npos);
  // Recovered: lower 1.15 is the limit itself.
  checks = rolled_back_slice_checks(standing, summary(1, 0.9, 1.1, {slice("owner=bob", 1.2, 1.15, 1.3)}), release_time, 0.05);
  CHECK(checks[0].passed);
  // No position of the slice in the hold-out: not applicable, said so.
  checks = rolled_back_slice_checks(standing, summary(1, 0.9, 1.1, {}), release_time, 0.05);
  CHECK(checks[0].passed);
  CHECK_FALSE(checks[0].applicable);
}

TEST_CASE("monitor: what was in service at T, and why", "[release][monitor]") {
  const std::vector<ReleaseRecord> records = {
      promoted("records/20240101T000000.000000Z-aaaaaaaaaaaa-1.json", "/ck/1"),
      promoted("records/20240102T000000.500000Z-bbbbbbbbbbbb-1.json", "/ck/2"),
      promoted("records/20240102T120000.000000Z-cccccccccccc-1.json", "/ck/x", false),  // a reject moves nothing
      promoted("records/20240104T000000.000000Z-dddddddddddd-1.json", "/ck/4")};
  ReleaseRecord dry = promoted("records/20240103T120000.000000Z-eeeeeeeeeeee-1.json", "/ck/dry");
  dry.dry_run = true;  // a dry run moves nothing either
  std::vector<ReleaseRecord> with_dry = records;
  with_dry.push_back(dry);
  const std::vector<RollbackRecord> rollbacks = {rollback("rollbacks/20240103T000000.000000Z-aaaaaaaaaaaa-1.json",
                                                          records[1].record_path, records[0].record_path)};
  const auto timeline = service_timeline(with_dry, rollbacks);
  REQUIRE(timeline.size() == 4);  // two promotions, the rollback, the last promotion
  CHECK(timeline[2].cause == rollbacks[0].record_path);
  CHECK(timeline[2].effective == "2024-01-03T00:00:00.000000Z");
  const auto at = [&](const char* t) { return in_service_at(timeline, rfc3339_micros(t)); };
  CHECK_FALSE(at("2023-12-31T23:59:59Z"));
  CHECK(at("2024-01-01T00:00:00Z")->record == records[0].record_path);  // effective at its own second
  CHECK(at("2024-01-02T00:00:00Z")->record == records[0].record_path);  // r2 takes effect at 00:00:00.5
  CHECK(at("2024-01-02T00:00:00.499999Z")->record == records[0].record_path);
  CHECK(at("2024-01-02T00:00:00.5Z")->record == records[1].record_path);  // its own time names it
  CHECK(at("2024-01-02T18:00:00Z")->record == records[1].record_path);  // the reject changed nothing
  const auto back = at("2024-01-03T12:30:00Z");                           // after the rollback, past the dry run
  CHECK(back->record == records[0].record_path);
  CHECK(back->checkpoint == "/ck/" + records[0].record_path);
  CHECK(back->why.find("rolled back from " + records[1].record_path) != std::string::npos);
  CHECK(back->why.find("slice_regression:owner=bob") != std::string::npos);
  CHECK(at("2030-01-01T00:00:00Z")->record == records[3].record_path);
  CHECK(at("2030-01-01T00:00:00Z")->why.find("promoted by") == 0);

  // The rollback stands until the next promotion.
  CHECK(standing_rollback({records[0], records[1]}, rollbacks)->record_path == rollbacks[0].record_path);
  CHECK_FALSE(standing_rollback(records, rollbacks));
  CHECK_THROWS_AS(registry_stamp_seconds("records/x.json"), UsageError);
  CHECK(registry_stamp_rfc3339("rollbacks/20241204T194532.123456Z-ab-1.json") == "2024-12-04T19:45:32.123456Z");
  CHECK(rfc3339_micros("1970-01-01T00:00:01.25Z") == 1250000);
  CHECK(rfc3339_micros("1970-01-01T00:00:01.1234567Z") == 1123456);
  CHECK(rfc3339_micros("1970-01-01T01:00:00+01:00") == 0);
  CHECK_THROWS_AS(rfc3339_micros("yesterday"), UsageError);
}

TEST_CASE("monitor: fails closed, naming what is missing, before it writes anything", "[release][monitor]") {
  namespace fs = std::filesystem;
  const std::string dir = test::temp_dir("monitor_fail_closed");
  const std::string policy = std::string(SHARDTRAIN_SOURCE_DIR) + "/scripts/release-policy.json";
  release_gate::MonitorOptions o;
  o.registry = dir + "/registry";
  o.policy_path = policy;
  o.data_path = dir + "/new.h5";

  // No registry, then an empty one: no release in service; nothing is created.
  CHECK_THROWS_WITH(release_gate::monitor_release(o), Catch::Contains("no release registry here"));
  CHECK_FALSE(fs::exists(o.registry));
  fs::create_directories(o.registry);
  CHECK_THROWS_WITH(release_gate::monitor_release(o), Catch::Contains("no release in service"));
  CHECK(fs::is_empty(o.registry));

  // A policy without rollback rules.
  {
    std::ifstream in(policy);
    nlohmann::json p = nlohmann::json::parse(in);
    p.erase("rollback");
    std::ofstream(dir + "/no-rollback.json") << p.dump();
    release_gate::MonitorOptions n = o;
    n.policy_path = dir + "/no-rollback.json";
    CHECK_THROWS_WITH(release_gate::monitor_release(n), Catch::Contains("declares no \"rollback\" rules"));
  }

  // A release in service (a record, promoted), trained on a dataset of two documents of 2024-01-01/02.
  {
    data::DatasetWriter w(dir + "/old.h5", 4, "test", 3);
    const std::vector<std::uint32_t> tokens = {0, 1, 2, 1, 0, 2};
    w.add_document("a", 1, parse_rfc3339("2024-01-01T12:00:00Z"), parse_rfc3339("2024-01-01T13:00:00Z"), "alice", tokens);
    w.add_document("b", 1, parse_rfc3339("2024-01-02T12:00:00Z"), parse_rfc3339("2024-01-02T13:00:00Z"), "bob", tokens);
    w.finish();
  }
  const ReleaseRegistry registry(o.registry);
  ReleaseRecord r = promoted("", dir + "/gone/checkpoints/step_00000001");
  r.artifact.manifest_sha256 = std::string(64, 'a');
  r.data.dataset = dir + "/old.h5";
  r.data.cutoff = "2024-01-02T00:00:00Z";
  r.data.training_cutoff = "2024-01-02T00:00:00Z";
  r.policy = read_release_policy(policy);
  const std::string path = registry.write_record(r);
  registry.promote(path, r);
  const auto files = [&] {
    std::size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(o.registry)) n += e.is_regular_file();
    return n;
  };
  const std::size_t before = files();

  // The new snapshot is missing.
  CHECK_THROWS_WITH(release_gate::monitor_release(o), Catch::Contains(o.data_path) && Catch::Contains("no such dataset"));
  // A snapshot without any document after --since.
  o.data_path = dir + "/old.h5";
  o.since = "2024-01-03T00:00:00Z";
  CHECK_THROWS_WITH(release_gate::monitor_release(o),
                    Catch::Contains("no document matured after 2024-01-03T00:00:00Z") && Catch::Contains("newer snapshot"));
  // Matured documents, but the release's checkpoint is gone.
  o.since = "2024-01-02T00:00:00Z";
  CHECK_THROWS_WITH(release_gate::monitor_release(o), Catch::Contains("is gone"));
  CHECK(files() == before);  // nothing written: no record says "keep" without a score
  fs::remove_all(dir);
}

namespace {

namespace fs = std::filesystem;

// SHA-256("abc") and SHA-256("abd") (FIPS 180-2's example, and `printf abd | sha256sum`): the
// model files below hold these bytes, so the identity the registry records is checked against a
// digest computed elsewhere.
constexpr const char* kShaAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

// Registers baseline `name` by hand: its record, and a model file of `bytes` (what the registry hashes).
void plant_baseline(const ReleaseRegistry& registry, const std::string& name, const std::string& bytes) {
  BaselineRecord b;
  b.name = name;
  b.order = 1;
  b.model_file = name + ".h5";
  b.created = "2024-01-01T00:00:00Z";
  b.evaluation.kind = kNgramEvaluation;
  registry.write_baseline(b);
  std::ofstream(registry.baseline_path(name, ".h5"), std::ios::binary) << bytes;
}

std::size_t files_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

// A rollback of `from` to the registered baseline `to`, committed and the pointer moved, as
// monitor_release does it (record first, then the pointer).
RollbackRecord roll_back_to_baseline(const ReleaseRegistry& registry, const ReleaseRecord& from, const std::string& to,
                                     std::vector<std::string> slices) {
  RollbackRecord b;
  b.from = {from.record_path, from.artifact.folder, from.artifact.manifest_sha256};
  b.to_baseline = registry.served_baseline(to);
  b.to_reason = "the policy's rollback.fallback_baseline (no previous known-good of " + from.record_path + ")";
  b.monitoring_record = "monitoring/none.json";
  for (const auto& key : slices) b.reasons.push_back("slice_regression:" + key + ": worse");
  b.slices = std::move(slices);
  b.rolled_back = now_rfc3339();
  b.record_path = registry.write_rollback(b);
  registry.roll_back(b.record_path, b);
  return b;
}

}  // namespace

TEST_CASE("monitor: with no previous known-good, a failing release goes to the baseline named", "[release][monitor]") {
  const std::string dir = test::temp_dir("rollback_target") + "/reg";
  const ReleaseRegistry registry(dir);
  plant_baseline(registry, "ngram-a", "abc");
  plant_baseline(registry, "ngram-b", "abd");
  ReleaseRecord first = promoted("", "/ck/1");
  first.artifact.manifest_sha256 = std::string(64, '1');
  first.record_path = registry.write_record(first);
  registry.promote(first.record_path, first);
  RollbackRules rules;  // no fallback_baseline

  // Neither a previous known-good nor a baseline named: nowhere to go (the monitor records rollback_blocked).
  CHECK_FALSE(release_gate::rollback_target(registry, first, "", rules));

  // The policy's baseline, with the model file's identity.
  rules.fallback_baseline = "ngram-a";
  auto t = release_gate::rollback_target(registry, first, "", rules);
  REQUIRE(t);
  CHECK_FALSE(t->release);
  REQUIRE(t->baseline);
  CHECK(t->baseline->name == "ngram-a");
  CHECK(t->baseline->file == "baselines/ngram-a.json");
  CHECK(t->baseline->model_file == "baselines/ngram-a.h5");
  CHECK(t->baseline->sha256 == kShaAbc);
  CHECK(t->reason.find("fallback_baseline") != std::string::npos);

  // The command line's baseline wins over the policy's.
  t = release_gate::rollback_target(registry, first, "baseline:ngram-b", rules);
  REQUIRE(t->baseline);
  CHECK(t->baseline->name == "ngram-b");
  CHECK(t->baseline->sha256 != kShaAbc);
  CHECK(t->reason == "--rollback-to baseline:ngram-b");

  // Unknown names are refused, naming the source and the registered ones.
  CHECK_THROWS_WITH(release_gate::rollback_target(registry, first, "baseline:nope", rules),
                    Catch::Contains("--rollback-to baseline:nope") && Catch::Contains("no baseline 'nope'") &&
                        Catch::Contains("registered: ngram-a, ngram-b"));
  CHECK_THROWS_AS(release_gate::rollback_target(registry, first, "baseline:", rules), UsageError);
  RollbackRules unknown = rules;
  unknown.fallback_baseline = "gone";
  CHECK_THROWS_WITH(release_gate::rollback_target(registry, first, "", unknown),
                    Catch::Contains("rollback.fallback_baseline") && Catch::Contains("no baseline 'gone'"));

  // A previous known-good comes before the policy's baseline.
  ReleaseRecord second = promoted("", "/ck/2");
  second.artifact.manifest_sha256 = std::string(64, '2');
  second.previous_last_known_good = first.record_path;
  second.record_path = registry.write_record(second);
  t = release_gate::rollback_target(registry, second, "", rules);
  REQUIRE(t->release);
  CHECK(t->release->record_path == first.record_path);
  CHECK_FALSE(t->baseline);

  // monitor_release resolves the target before it scores: an unknown baseline exits 2 (UsageError)
  // and writes nothing, whether named on the command line or by the policy.
  registry.promote(first.record_path, first);
  const std::size_t before = files_in(dir);
  release_gate::MonitorOptions o;
  o.registry = dir;
  o.policy_path = std::string(SHARDTRAIN_SOURCE_DIR) + "/scripts/release-policy.json";
  o.data_path = dir + "/no-such-snapshot.h5";  // never reached
  o.rollback_to = "baseline:nope";
  CHECK_THROWS_AS(release_gate::monitor_release(o), UsageError);
  CHECK_THROWS_WITH(release_gate::monitor_release(o), Catch::Contains("no baseline 'nope'"));
  {
    std::ifstream in(o.policy_path);
    nlohmann::json p = nlohmann::json::parse(in);
    p["rollback"]["fallback_baseline"] = "gone";
    write_json_file(dir + "/../policy-gone.json", p);
  }
  o.rollback_to = "";
  o.policy_path = dir + "/../policy-gone.json";
  CHECK_THROWS_WITH(release_gate::monitor_release(o), Catch::Contains("fallback_baseline") && Catch::Contains("'gone'"));
  CHECK(files_in(dir) == before);
}

TEST_CASE("monitor: a baseline in service: the pointer, history and the monitor say so", "[release][monitor]") {
  const std::string dir = test::temp_dir("baseline_in_service") + "/reg";
  const ReleaseRegistry registry(dir);
  plant_baseline(registry, "ngram-a", "abc");
  ReleaseRecord first = promoted("", "/ck/1");
  first.artifact.manifest_sha256 = std::string(64, '1');
  first.record_path = registry.write_record(first);
  registry.promote(first.record_path, first);
  const RollbackRecord b = roll_back_to_baseline(registry, first, "ngram-a", {"owner=bob"});

  // The pointer names the baseline by name and sha256, and no release.
  const auto pointer = registry.pointer();
  REQUIRE(pointer);
  REQUIRE(pointer->baseline);
  CHECK(pointer->baseline->name == "ngram-a");
  CHECK(pointer->baseline->sha256 == kShaAbc);
  CHECK_FALSE(pointer->record);
  CHECK(pointer->rollback == b.record_path);
  const auto state = registry.in_service();
  REQUIRE(state);
  CHECK_FALSE(state->release);
  REQUIRE(state->baseline);
  CHECK(state->baseline->name == "ngram-a");
  CHECK_FALSE(registry.last_known_good());  // no release in service
  const RollbackRecord stored = registry.rollbacks().at(0);
  CHECK(stored.format_version == 2);
  CHECK_FALSE(stored.to);
  CHECK(stored.to_baseline == b.to_baseline);

  // history --at: the baseline, rolled back from the first release, and why; before it, the release.
  const auto timeline = service_timeline(registry.history(), registry.rollbacks());
  REQUIRE(timeline.size() == 2);
  const auto now = in_service_at(timeline, rfc3339_micros(registry_stamp_rfc3339(b.record_path)));
  REQUIRE(now);
  CHECK_FALSE(now->record);
  REQUIRE(now->baseline);
  CHECK(now->baseline->name == "ngram-a");
  CHECK(now->in_service_name() == "baseline ngram-a");
  CHECK(now->why.find("rolled back from " + first.record_path) == 0);
  CHECK(now->why.find("slice_regression:owner=bob") != std::string::npos);
  CHECK(now->to_json()["record"].is_null());
  CHECK(now->to_json()["baseline"]["sha256"] == kShaAbc);
  const std::string text = in_service_at_text("T", now);
  CHECK(text.find("in service at T: baseline ngram-a (baselines/ngram-a.h5, sha256 ba7816bf8f01)") == 0);
  CHECK(text.find("why: rolled back from " + first.record_path) != std::string::npos);
  const auto before = in_service_at(timeline, rfc3339_micros(registry_stamp_rfc3339(b.record_path)) - 1);
  CHECK(before->record == first.record_path);
  CHECK(standing_rollback(registry.history(), registry.rollbacks())->record_path == b.record_path);

  // history without --at: the release, then the rollback, typed by their "format".
  const auto entries = registry_history(registry.history(), registry.rollbacks());
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].to_json()["format"] == "shardtrain-release-record");
  CHECK(entries[1].to_json()["format"] == "shardtrain-rollback-record");
  CHECK(entries[1].to_json()["to_baseline"]["name"] == "ngram-a");
  CHECK(entries[0].effective < entries[1].effective);
  const std::string table = history_text(entries, state, registry.baseline_names());
  CHECK(table.find(first.record_path + " -> baseline ngram-a") != std::string::npos);
  CHECK(table.find("last-known-good: baseline ngram-a") != std::string::npos);

  // The monitor scores releases only: a clear refusal (exit 2), nothing written.
  release_gate::MonitorOptions o;
  o.registry = dir;
  o.policy_path = std::string(SHARDTRAIN_SOURCE_DIR) + "/scripts/release-policy.json";
  o.data_path = dir + "/no-such-snapshot.h5";
  const std::size_t files = files_in(dir);
  CHECK_THROWS_AS(release_gate::monitor_release(o), UsageError);
  CHECK_THROWS_WITH(release_gate::monitor_release(o),
                    Catch::Contains("baseline 'ngram-a' is in service") && Catch::Contains("scores releases only"));
  CHECK(files_in(dir) == files);

  // Registered again under the same name: the baseline in service is gone, and readers say so.
  std::ofstream(registry.baseline_path("ngram-a", ".h5"), std::ios::binary) << "abd";
  CHECK_THROWS_AS(registry.in_service(), IoError);
  CHECK_THROWS_WITH(registry.in_service(), Catch::Contains("registered again"));
}

TEST_CASE("decide: with a baseline in service, the candidate is compared with it, re-scored on its hold-out", "[release][monitor]") {
  test::ensure_mpi();  // the trainer runs on MPI_COMM_WORLD (one rank here)
  const std::string dir = test::temp_dir("decide_baseline_in_service");
  const std::string data = dir + "/markov.h5";
  data::MarkovOptions spec;
  spec.tokens_per_document = 2000;
  data::write_markov_dataset(data, spec);  // 20 documents, one a day from 2024-01-01, owners markov-a/-b
  TrainOptions t;
  t.data.path = data;
  t.data.cutoff = "2024-01-15T00:00:00Z";
  t.model = ModelConfig{0, 32, 32, 2, 2};
  t.schedule.global_batch = 8;
  t.schedule.micro_batch = 8;
  t.schedule.steps = 4;
  t.optimizer.max_lr = 3e-3;
  t.optimizer.warmup_steps = 1;
  t.optimizer.decay_steps = 4;
  t.run_dir = dir + "/run";
  t.checkpoint.every = 4;
  t.telemetry.log_every = 1000;
  t.evaluation.samples = 8;
  t.telemetry.peak_flop_per_s = 1e11;
  run_training(t);

  const std::string reg = dir + "/reg";
  // The baseline, registered on an earlier snapshot's hold-out (cutoff 01-13): the candidate's (01-15)
  // differs, so decide must score the n-gram again, from its model file.
  release_gate::BaselineOptions bo;
  bo.name = "ngram-first";
  bo.registry = reg;
  bo.plan.data_path = data;
  bo.plan.cutoff = "2024-01-13T00:00:00Z";
  bo.plan.seq_len = 32;
  bo.plan.max_samples = 8;
  bo.plan.bootstrap.resamples = 50;
  bo.order = 1;
  release_gate::register_baseline(bo);
  const ReleaseRegistry registry(reg);
  // The first release, rolled back to the baseline on owner=markov-a; its release-time figure for
  // the slice is very tight (upper 0.1), so no candidate is back within it.
  ReleaseRecord first = promoted("", dir + "/gone/step_1");
  first.artifact.manifest_sha256 = std::string(64, '1');
  first.candidate.scores = summary(1.0, 0.9, 1.1, {slice("owner=markov-a", 0.05, 0.0, 0.1)});
  first.record_path = registry.write_record(first);
  registry.promote(first.record_path, first);
  roll_back_to_baseline(registry, first, "ngram-first", {"owner=markov-a"});
  // The baseline in service cannot be registered over (its sha256 would no longer match the pointer's).
  CHECK_THROWS_WITH(release_gate::register_baseline(bo), Catch::Contains("'ngram-first' is in service"));

  const std::string policy = std::string(SHARDTRAIN_SOURCE_DIR) + "/scripts/release-policy.json";
  release_gate::DecideOptions o;
  o.checkpoint = t.run_dir + "/checkpoints";
  o.policy_path = policy;
  o.registry = reg;
  o.eval.holdout.data_path = data;
  o.eval.holdout.cutoff = "2024-01-15T00:00:00Z";
  o.eval.holdout.bootstrap.resamples = 50;
  o.eval.latency_runs = 2;
  o.max_samples = 8;
  o.dry_run = true;  // the record is what this case reads; nothing moves
  const release_gate::Decision d = release_gate::decide_release(o);
  const ReleaseRecord& r = d.record;
  CHECK(r.baseline.name == "ngram-first");
  CHECK(r.baseline.kind == kNgramEvaluation);
  CHECK(r.baseline.file == registry.baseline_path("ngram-first", ".json"));
  CHECK(r.baseline_evaluation.kind == kNgramEvaluation);
  CHECK(r.baseline_evaluation.holdout.cutoff == "2024-01-15T00:00:00Z");
  CHECK(r.baseline_evaluation.holdout.same_positions(r.candidate.holdout));
  CHECK(registry.baseline("ngram-first").evaluation.holdout.cutoff == "2024-01-13T00:00:00Z");  // the registered one unchanged
  CHECK_FALSE(r.previous_last_known_good);  // no release was in service
  REQUIRE(r.utility);
  CHECK(r.utility->fallback == "ngram-first");
  // The standing rollback's slice, held to the rolled-back release's release-time figure + the rule's bound.
  const CheckResult& back = named(r.checks, "rolled_back_slice:owner=markov-a");
  CHECK(back.applicable);
  CHECK_FALSE(back.passed);
  CHECK(std::get<double>(back.limit) == Approx(0.1 + read_release_policy(policy).rollback->max_slice_regression));
  CHECK(back.reason.find("still above the rolled-back release's release-time") != std::string::npos);
  CHECK_FALSE(d.promote);
  CHECK(r.in_service.name == "ngram-first");  // what stays in service: the baseline
  CHECK(r.in_service.kind == std::string(kNgramEvaluation));
  CHECK_FALSE(r.in_service.checkpoint);
}
