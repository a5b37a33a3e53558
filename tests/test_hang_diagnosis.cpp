// hang-diagnose (diagnose/hang_diagnosis.hpp, diagnose/flight_dump.hpp) on synthetic flight records
// written to the spec (docs/FORMATS.md "Flight record", format_version 3): which collective blocked,
// who did not join it, the culprit or why it is ambiguous; and the refusals of unusable input.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/diagnose/flight_dump.hpp"
#include "shardtrain/diagnose/hang_diagnosis.hpp"
#include "test_support.hpp"

using nlohmann::json;
using namespace shardtrain;
using namespace shardtrain::hang;

namespace {

constexpr double kT0 = 1'700'000'000.0;  // unix seconds of the first synthetic entry

struct Entry {
  std::uint64_t seq;
  std::string state = "completed";
  std::int64_t step = 1;
  std::string phase = "backward";
  std::string op = "AllReduce";
  std::uint64_t numel = 1024;
  double t = 0;  // submission time; 0: kT0 + seq
  std::string dtype = "float32";
  int root = -1;
  json part_of = nullptr;  // {group, collective, op, numel} on a stage of a two-level collective
};

// `per_step` completed AllReduces per step, for steps [1, steps]: seq 1, 2, ...
std::vector<Entry> completed_steps(int steps, int per_step = 2) {
  std::vector<Entry> out;
  for (int s = 1; s <= steps; ++s)
    for (int k = 0; k < per_step; ++k) out.push_back({std::uint64_t(out.size() + 1), "completed", s, k == 0 ? "backward" : "step-end"});
  return out;
}

std::vector<Entry> plus(std::vector<Entry> entries, const std::vector<Entry>& more) {
  entries.insert(entries.end(), more.begin(), more.end());
  return entries;
}

// One rank's dump, as the writer would produce it.
class Dump {
 public:
  Dump(int rank, int world, const std::string& reason, double dumped_at) {
    j_ = {{"format", "shardtrain-flight-record"}, {"format_version", 3}, {"job_id", "job-42"}, {"rank", rank},
          {"world_size", world}, {"hostname", "node"}, {"pid", 1000 + rank}, {"code_version", "test"},
          {"reason", reason}, {"dumped_at", dumped_at}, {"timed_out_group", nullptr}, {"trigger", nullptr},
          {"triggers", json::array()}, {"phases", json::array()}, {"groups", json::array()},
          {"now", {{"phase", "backward"}, {"step", 1}, {"since", dumped_at - 1}}}};
  }
  Dump& now(const std::string& phase, std::int64_t step, double since) {
    j_["now"] = {{"phase", phase}, {"step", step}, {"since", since}};
    return *this;
  }
  Dump& timed_out(const std::string& group, std::uint64_t seq) {
    j_["timed_out_group"] = group;
    j_["trigger"] = {{"group", group}, {"seq", seq}, {"op", "AllReduce"}, {"timeout_ms", 300000}, {"detected_by", "wait"}};
    return *this;
  }
  Dump& exit_error(const std::string& message) {
    j_["trigger"] = {{"error", message}, {"exit_code", 1}};
    return *this;
  }
  // Counters from the entries unless given (a ring that lost entries keeps counting).
  Dump& group(const std::string& name, const std::vector<int>& world_ranks, int my_rank, const std::vector<Entry>& entries,
              json counters = nullptr) {
    json g = {{"name", name}, {"rank", my_rank}, {"size", world_ranks.size()}, {"world_ranks", world_ranks},
              {"phase", nullptr}, {"capacity", 2048}, {"dropped", 0}, {"entries", json::array()}};
    std::uint64_t enq = 0, started = 0, completed = 0;
    for (const auto& e : entries) {
      const double t = e.t > 0 ? e.t : kT0 + double(e.seq);
      const bool issued = e.state != "queued" && e.state != "skipped";
      g["entries"].push_back({{"id", e.seq}, {"seq", e.seq}, {"op", e.op}, {"group", name}, {"dtype", e.dtype},
                              {"numel", e.numel}, {"bytes", e.numel * 4}, {"root", e.root}, {"step", e.step},
                              {"phase", e.phase}, {"state", e.state}, {"t_enqueue", t},
                              {"t_start", issued ? json(t) : json()},
                              {"t_end", e.state == "completed" ? json(t + 0.01) : json()}});
      if (!e.part_of.is_null()) g["entries"].back()["part_of"] = e.part_of;
      enq = std::max(enq, e.seq);
      if (issued) started = std::max(started, e.seq);
      if (e.state == "completed") completed = std::max(completed, e.seq);
    }
    g["last_enqueued_seq"] = enq;
    g["last_started_seq"] = started;
    g["last_completed_seq"] = completed;
    if (counters.is_object()) g.update(counters);
    j_["groups"].push_back(g);
    return *this;
  }
  json& json_ref() { return j_; }
  operator json() const { return j_; }

 private:
  json j_;
};

Diagnosis run(const std::vector<json>& dumps, DiagnosisOptions options = {}) {
  std::vector<RankDump> parsed;
  for (const auto& j : dumps) parsed.push_back(parse_flight_dump(j, "flight.rank" + std::to_string(j["rank"].get<int>()) + ".json"));
  Diagnosis d = diagnose(check_dump_set(std::move(parsed)), options);
  UNSCOPED_INFO(d.text());
  return d;
}

const std::vector<int> kW2 = {0, 1}, kW4 = {0, 1, 2, 3};
const double kDumpedAt = kT0 + 400;  // a 300 s timeout after the last entries

// The skipped seq `s` on the skipping rank; the peers' entry `s` timed out.
Entry timed_out_at(std::uint64_t s, std::int64_t step = 6) { return {s, "timed_out", step, "backward"}; }

}  // namespace

TEST_CASE("hang-diagnose: a skipped collective at W=2 names the skipping rank", "[hang-diagnose]") {
  const auto history = completed_steps(5);  // seq 1..10
  // Rank 1 skipped seq 11 and went on to submit seq 12, which its peer never will: skipped still
  // means not joined, whatever its last_started says.
  const Diagnosis d = run({Dump(0, 2, "timeout", kDumpedAt).timed_out("dp", 11).group("dp", kW2, 0, plus(history, {timed_out_at(11)})),
                           Dump(1, 2, "timeout", kDumpedAt).timed_out("dp", 12)
                               .group("dp", kW2, 1, plus(history, {{11, "skipped", 6}, {12, "timed_out", 6, "step-end"}}))});
  CHECK(d.verdict == Verdict::kHang);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 1);
  CHECK(d.culprit->cause == hang::Cause::kSkipped);
  REQUIRE(d.blocked);
  CHECK(d.blocked->group == "dp");
  CHECK(d.blocked->seq == 11);
  CHECK(d.blocked->step == 6);
  CHECK(d.blocked->joined == std::vector<int>{0});
  CHECK(d.blocked->not_joined == std::vector<int>{1});
  CHECK(d.exit_code() == 1);
}

TEST_CASE("hang-diagnose: a skipped collective at W=4, the skipping rank one behind", "[hang-diagnose]") {
  const auto history = completed_steps(5);
  std::vector<json> dumps;
  for (int r : {0, 1, 3})
    dumps.push_back(Dump(r, 4, "timeout", kDumpedAt).timed_out("dp", 11).group("dp", kW4, r, plus(history, {timed_out_at(11)})));
  dumps.push_back(Dump(2, 4, "signal", kDumpedAt + 1).now("step-end", 6, kT0 + 12)
                      .group("dp", kW4, 2, plus(history, {{11, "skipped", 6}})));
  const Diagnosis d = run(dumps);
  CHECK(d.verdict == Verdict::kHang);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 2);
  CHECK(d.culprit->cause == hang::Cause::kSkipped);
  REQUIRE(d.blocked);
  CHECK(d.blocked->joined == std::vector<int>{0, 1, 3});
  CHECK(d.blocked->not_joined == std::vector<int>{2});
  CHECK(d.candidates == std::vector<int>{2});
}

TEST_CASE("hang-diagnose: a rank hung in compute is the culprit, not the ranks that timed out", "[hang-diagnose]") {
  const auto history = completed_steps(2);  // seq 1..4, steps 1..2
  std::vector<json> dumps;
  for (int r : {0, 1, 3})
    dumps.push_back(Dump(r, 4, "timeout", kDumpedAt).timed_out("dp", 5).group("dp", kW4, r, plus(history, {timed_out_at(5, 3)})));
  // Rank 2 never submitted seq 5: SIGTERM'd by the launcher while in forward at step 3.
  dumps.push_back(Dump(2, 4, "signal", kDumpedAt + 2).now("forward", 3, kT0 + 5).group("dp", kW4, 2, history));
  const Diagnosis d = run(dumps);
  CHECK(d.verdict == Verdict::kHang);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 2);
  CHECK(d.culprit->cause == hang::Cause::kOutsideCollective);
  CHECK_THAT(d.culprit->evidence, Catch::Contains("in forward at step 3"));
  CHECK_THAT(d.ranks[2].doing, Catch::Contains("last completed dp seq 4"));
  CHECK(d.ranks[2].now.phase == "forward");
  CHECK(d.ranks[2].now_for_s == Approx(kDumpedAt + 2 - (kT0 + 5)));
  REQUIRE(d.blocked);
  CHECK(d.blocked->seq == 5);
  CHECK(d.blocked->step == 3);
}

TEST_CASE("hang-diagnose: a killed rank (no dump) at W=4", "[hang-diagnose]") {
  const auto history = completed_steps(3);
  std::vector<json> dumps;
  for (int r : {0, 1, 2})
    dumps.push_back(Dump(r, 4, "timeout", kDumpedAt).timed_out("dp", 7).group("dp", kW4, r, plus(history, {timed_out_at(7, 4)})));
  const Diagnosis d = run(dumps);
  CHECK(d.missing_ranks == std::vector<int>{3});
  CHECK(d.verdict == Verdict::kHang);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 3);
  CHECK(d.culprit->cause == hang::Cause::kNoDump);
  REQUIRE(d.blocked);
  CHECK(d.blocked->no_dump == std::vector<int>{3});
  CHECK(d.blocked->not_joined.empty());
  REQUIRE(d.ranks.size() == 4);
  CHECK_FALSE(d.ranks[3].dump);
  CHECK_THAT(d.ranks[3].doing, Catch::Contains("no dump (killed or crashed"));
}

TEST_CASE("hang-diagnose: a numel mismatch at W=4 names the minority", "[hang-diagnose]") {
  const auto history = completed_steps(3);
  std::vector<json> dumps;
  for (int r = 0; r < 4; ++r) {
    Entry e = timed_out_at(7, 4);
    if (r == 1) e.numel = 999;
    dumps.push_back(Dump(r, 4, "timeout", kDumpedAt).timed_out("dp", 7).group("dp", kW4, r, plus(history, {e})));
  }
  const Diagnosis d = run(dumps);
  CHECK(d.verdict == Verdict::kMismatch);
  REQUIRE(d.mismatches.size() == 1);
  CHECK(d.mismatches[0].field == "numel");
  CHECK(d.mismatches[0].seq == 7);
  CHECK(d.mismatches[0].values.at(1) == 999);
  CHECK(d.mismatches[0].values.at(0) == 1024);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 1);
  CHECK(d.culprit->cause == hang::Cause::kMismatch);
}

TEST_CASE("hang-diagnose: stages that agree on their own count but not on the whole call's name the short rank",
          "[hang-diagnose]") {
  // Two nodes x two ranks, a pipelined two-level all-reduce: every rank's node stage (group
  // dp.node, one group per node) moves a 32-element chunk, but rank 3's whole call is one element
  // short (65 on the others). Only the whole call's count (part_of.numel) tells them apart.
  const auto history = completed_steps(3);
  std::vector<json> dumps;
  for (int r = 0; r < 4; ++r) {
    Entry e = timed_out_at(7, 4);
    e.op = "ReduceScatter";
    e.numel = 32;
    e.part_of = {{"group", "dp"}, {"collective", 4}, {"op", "AllReduce"}, {"numel", r == 3 ? 64 : 65}};
    const std::vector<int> node = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    dumps.push_back(Dump(r, 4, "timeout", kDumpedAt).timed_out("dp.node", 7).group("dp.node", node, r % 2, plus(history, {e})));
  }
  const Diagnosis d = run(dumps);
  CHECK(d.verdict == Verdict::kMismatch);
  REQUIRE(d.mismatches.size() == 1);
  CHECK(d.mismatches[0].field == "part_of.numel");
  CHECK(d.mismatches[0].group == "dp.node");
  CHECK(d.mismatches[0].values.at(3) == 64);
  CHECK(d.mismatches[0].values.at(2) == 65);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 3);
  CHECK(d.culprit->cause == hang::Cause::kMismatch);
}

TEST_CASE("hang-diagnose: a numel mismatch at W=2 is settled by earlier steps", "[hang-diagnose]") {
  // Both directions, so that the answer is not "always the higher rank".
  for (int odd : {0, 1}) {
    DYNAMIC_SECTION("rank " << odd << " differs from history") {
      const auto history = completed_steps(3);  // the step's first collective: numel 1024 in backward
      std::vector<json> dumps;
      for (int r = 0; r < 2; ++r) {
        Entry e = timed_out_at(7, 4);
        if (r == odd) e.numel = 512;
        dumps.push_back(Dump(r, 2, "timeout", kDumpedAt).timed_out("dp", 7).group("dp", kW2, r, plus(history, {e})));
      }
      const Diagnosis d = run(dumps);
      CHECK(d.verdict == Verdict::kMismatch);
      REQUIRE(d.culprit);
      CHECK(d.culprit->rank == odd);
      CHECK_THAT(d.culprit->evidence, Catch::Contains("earlier steps (1024)"));
    }
  }
}

TEST_CASE("hang-diagnose: a numel mismatch at W=2 without history is ambiguous", "[hang-diagnose]") {
  std::vector<json> dumps;
  for (int r = 0; r < 2; ++r) {
    Entry e = timed_out_at(1, 1);
    e.numel = r == 0 ? 1024 : 512;
    dumps.push_back(Dump(r, 2, "timeout", kDumpedAt).timed_out("dp", 1).group("dp", kW2, r, {e}));
  }
  const Diagnosis d = run(dumps);
  CHECK(d.verdict == Verdict::kAmbiguous);
  CHECK_FALSE(d.culprit);
  CHECK(d.candidates == std::vector<int>{0, 1});
  CHECK(d.mismatches.size() == 1);
  CHECK(d.exit_code() == 1);
}

TEST_CASE("hang-diagnose: two ranks waiting on each other in two groups is an ambiguous cycle", "[hang-diagnose]") {
  // Rank 0 issued A seq 3 then would issue B seq 3; rank 1 the other order.
  const std::vector<Entry> two = {{1}, {2}};
  const Diagnosis d = run(
      {Dump(0, 2, "timeout", kDumpedAt).timed_out("A", 3).group("A", kW2, 0, plus(two, {{3, "timed_out", 2, "backward", "AllReduce", 1024, kT0 + 50}}))
           .group("B", kW2, 0, two),
       Dump(1, 2, "timeout", kDumpedAt).timed_out("B", 3).group("A", kW2, 1, two)
           .group("B", kW2, 1, plus(two, {{3, "timed_out", 2, "backward", "AllGather", 64, kT0 + 50.5}}))});
  CHECK(d.verdict == Verdict::kAmbiguous);
  CHECK(d.candidates == std::vector<int>{0, 1});
  CHECK_THAT(d.explanation.back(), Catch::Contains("cycle"));
  REQUIRE(d.blocked);
  CHECK(d.blocked->group == "A");  // it blocked first (50.0 < 50.5)
}

TEST_CASE("hang-diagnose: a non-joiner waiting on a third rank in another group is a chain, not a cycle", "[hang-diagnose]") {
  // dp = {0,1,2,3}; tp = {2,3}. Ranks 2 and 3 both miss dp seq 5: rank 2 waits in tp seq 3 for
  // rank 3, and rank 3 is stuck in data loading. The culprit is rank 3.
  const auto history = completed_steps(2);
  const std::vector<Entry> tp_history = {{1}, {2}};
  const std::vector<int> tp = {2, 3};
  std::vector<json> dumps;
  for (int r : {0, 1})
    dumps.push_back(Dump(r, 4, "timeout", kDumpedAt).timed_out("dp", 5).group("dp", kW4, r, plus(history, {timed_out_at(5, 3)})));
  dumps.push_back(Dump(2, 4, "signal", kDumpedAt + 1).group("dp", kW4, 2, history)
                      .group("tp", tp, 0, plus(tp_history, {{3, "started", 3, "forward", "AllGather", 64, kT0 + 20}})));
  dumps.push_back(Dump(3, 4, "signal", kDumpedAt + 1).now("data", 3, kT0 + 10).group("dp", kW4, 3, history).group("tp", tp, 1, tp_history));
  const Diagnosis d = run(dumps);
  CHECK(d.verdict == Verdict::kHang);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 3);
  CHECK(d.culprit->cause == hang::Cause::kOutsideCollective);
  CHECK_THAT(d.ranks[2].doing, Catch::Contains("waiting in tp seq 3 AllGather"));
}

TEST_CASE("hang-diagnose: rings that wrapped are aligned by seq, and counters stand in for lost entries", "[hang-diagnose]") {
  // Alternating ops: aligned by position instead of seq, these rings would all mismatch.
  auto ring = [](std::uint64_t from, std::uint64_t to) {
    std::vector<Entry> out;
    for (std::uint64_t s = from; s <= to; ++s) {
      Entry e{s, "completed", std::int64_t(s / 2)};
      if (s % 2) e.op = "Broadcast", e.numel = 8, e.root = 0;
      out.push_back(e);
    }
    return out;
  };
  const Diagnosis d = run(
      {Dump(0, 2, "timeout", kDumpedAt).timed_out("dp", 101).group("dp", kW2, 0, plus(ring(98, 100), {timed_out_at(101, 50)}),
                                                                   {{"dropped", 97}, {"capacity", 4}}),
       // Rank 1: a ring that lost seq 1..94, and a second one holding nothing at all (counters only).
       Dump(1, 2, "signal", kDumpedAt + 1).now("data", 50, kT0 + 90)
           .group("dp", kW2, 1, ring(95, 100), {{"dropped", 94}, {"capacity", 6}})
           .group("ckpt", kW2, 1, {}, {{"last_enqueued_seq", 7}, {"last_started_seq", 7}, {"last_completed_seq", 7}, {"dropped", 7}})});
  CHECK(d.mismatches.empty());
  REQUIRE(d.blocked);
  CHECK(d.blocked->group == "dp");
  CHECK(d.blocked->seq == 101);
  CHECK(d.blocked->not_joined == std::vector<int>{1});
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 1);
  CHECK(d.culprit->cause == hang::Cause::kOutsideCollective);
  CHECK_THAT(d.culprit->evidence, Catch::Contains("last completed dp seq 100"));

  // Rank 0's ring lost every dp entry but the counters still say it waits in seq 101.
  const Diagnosis counters_only = run(
      {Dump(0, 2, "timeout", kDumpedAt).timed_out("dp", 101)
           .group("dp", kW2, 0, {}, {{"last_enqueued_seq", 101}, {"last_started_seq", 101}, {"last_completed_seq", 100}, {"dropped", 101}}),
       Dump(1, 2, "signal", kDumpedAt + 1).now("data", 50, kT0 + 90)
           .group("dp", kW2, 1, {}, {{"last_enqueued_seq", 100}, {"last_started_seq", 100}, {"last_completed_seq", 100}, {"dropped", 100}})});
  REQUIRE(counters_only.blocked);
  CHECK(counters_only.blocked->seq == 101);
  CHECK(counters_only.blocked->joined == std::vector<int>{0});
  REQUIRE(counters_only.culprit);
  CHECK(counters_only.culprit->rank == 1);
  CHECK_THAT(counters_only.culprit->evidence, Catch::Contains("entry no longer in the ring"));
}

TEST_CASE("hang-diagnose: every group complete is no hang", "[hang-diagnose]") {
  const auto history = completed_steps(4);
  std::vector<json> dumps;
  for (int r = 0; r < 4; ++r) dumps.push_back(Dump(r, 4, "requested", kDumpedAt).group("dp", kW4, r, history));
  const Diagnosis d = run(dumps);
  CHECK(d.verdict == Verdict::kNoHang);
  CHECK(d.exit_code() == 0);
  CHECK_FALSE(d.blocked);
  CHECK_FALSE(d.culprit);
  CHECK(d.to_json()["verdict"] == "no-hang");
  CHECK(d.to_json()["blocked"].is_null());
}

TEST_CASE("hang-diagnose: a live snapshot is a hang only after --min-wait", "[hang-diagnose]") {
  const auto history = completed_steps(4);  // seq 1..8
  // Rank 0 waits in seq 9 since `waited` seconds; rank 1 is still in forward.
  auto snapshot = [&](double waited) {
    const double at = kT0 + 1000;
    return std::vector<json>{
        Dump(0, 2, "signal", at).group("dp", kW2, 0, plus(history, {{9, "started", 5, "backward", "AllReduce", 1024, at - waited}})),
        Dump(1, 2, "signal", at).now("forward", 5, at - waited - 1).group("dp", kW2, 1, history)};
  };
  const Diagnosis short_wait = run(snapshot(5));
  CHECK(short_wait.verdict == Verdict::kNoHang);
  CHECK_THAT(short_wait.explanation.front(), Catch::Contains("In flight: rank 0 waiting in dp seq 9"));
  const Diagnosis long_wait = run(snapshot(120));
  CHECK(long_wait.verdict == Verdict::kHang);
  REQUIRE(long_wait.culprit);
  CHECK(long_wait.culprit->rank == 1);
  DiagnosisOptions patient;
  patient.min_wait_s = 200;
  CHECK(run(snapshot(120), patient).verdict == Verdict::kNoHang);
  // Every member joined, briefly in flight: no hang either.
  const double at = kT0 + 1000;
  const Entry in_flight{9, "started", 5, "backward", "AllReduce", 1024, at - 2};
  CHECK(run({Dump(0, 2, "signal", at).group("dp", kW2, 0, plus(history, {in_flight})),
             Dump(1, 2, "signal", at).group("dp", kW2, 1, plus(history, {in_flight}))})
            .verdict == Verdict::kNoHang);
}

TEST_CASE("hang-diagnose: an exit dump without a hang names the rank and its error", "[hang-diagnose]") {
  const auto history = completed_steps(3);
  const Diagnosis d = run({Dump(0, 2, "signal", kDumpedAt).group("dp", kW2, 0, history),
                           Dump(1, 2, "exit", kDumpedAt).exit_error("non-finite loss at step 3").group("dp", kW2, 1, history)});
  CHECK(d.verdict == Verdict::kErrorExit);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 1);
  CHECK(d.culprit->cause == hang::Cause::kErrorExit);
  CHECK_THAT(d.culprit->evidence, Catch::Contains("rank 1 exited with error: non-finite loss at step 3"));
}

TEST_CASE("hang-diagnose: the JSON report keeps the documented keys", "[hang-diagnose]") {
  const auto history = completed_steps(2);
  std::vector<json> dumps;
  for (int r : {0, 1, 2})
    dumps.push_back(Dump(r, 4, "timeout", kDumpedAt).timed_out("dp", 5).group("dp", kW4, r, plus(history, {timed_out_at(5, 3)})));
  const json j = run(dumps).to_json();
  for (const char* key : {"format", "format_version", "job_id", "world_size", "dumps", "missing_ranks", "verdict", "culprit",
                          "candidates", "blocked", "ranks", "mismatches", "explanation"})
    CHECK(j.contains(key));
  CHECK(j["format"] == "shardtrain-hang-diagnosis");
  CHECK(j["job_id"] == "job-42");
  CHECK(j["culprit"]["rank"] == 3);
  CHECK(j["culprit"]["cause"] == "no-dump");
  CHECK(j["blocked"]["joined"] == json({0, 1, 2}));
  CHECK(j["blocked"]["no_dump"] == json({3}));
  CHECK(j["blocked"]["phase"] == "backward");
  CHECK(j["ranks"][0]["now"]["phase"] == "backward");
  CHECK(j["ranks"][3]["dump"] == false);
  CHECK(j["dumps"][0]["file"] == "flight.rank0.json");
}

// ---- unusable input -----------------------------------------------------------------------------

namespace {
void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}
std::string valid_dump(int rank, const std::string& job = "job-42") {
  Dump d(rank, 2, "timeout", kDumpedAt);
  d.json_ref()["job_id"] = job;
  return json(d.group("dp", kW2, rank, completed_steps(1))).dump();
}
}  // namespace

TEST_CASE("hang-diagnose: unusable dumps are refused, naming the file", "[hang-diagnose]") {
  const std::string dir = test::temp_dir("hang-input");
  const std::string good = dir + "/flight.rank0.json";
  write_file(good, valid_dump(0));
  auto refused = [&](const std::vector<std::string>& inputs, const std::string& file, const std::string& what,
                     int world_size = 0) {
    INFO("expect " << file << ": " << what);
    CHECK_THROWS_AS(load_flight_dumps(inputs, world_size), UsageError);
    CHECK_THROWS_WITH(load_flight_dumps(inputs, world_size), Catch::Contains(file) && Catch::Contains(what));
  };
  CHECK(load_flight_dumps({good}).dumps.size() == 1);  // the reference: a good dump alone is read
  SECTION("malformed JSON") {
    write_file(dir + "/bad.json", "{\"format\": shardtrain}");
    refused({good, dir + "/bad.json"}, "bad.json", "malformed JSON");
  }
  SECTION("truncated") {
    const std::string text = valid_dump(1);
    write_file(dir + "/cut.json", text.substr(0, text.size() / 2));
    refused({good, dir + "/cut.json"}, "cut.json", "truncated");
  }
  SECTION("wrong format_version") {
    json j = json::parse(valid_dump(1));
    j["format_version"] = 2;
    write_file(dir + "/v2.json", j.dump());
    refused({good, dir + "/v2.json"}, "v2.json", "format_version 2");
  }
  SECTION("dumps of different jobs") {
    write_file(dir + "/other.json", valid_dump(1, "job-43"));
    refused({good, dir + "/other.json"}, "other.json", "different jobs");
  }
  SECTION("two dumps of one rank") {
    write_file(dir + "/again.json", valid_dump(0));
    refused({good, dir + "/again.json"}, "again.json", "second dump of rank 0");
  }
  SECTION("a rank out of range") {
    write_file(dir + "/flight.rank1.json", valid_dump(1));
    refused({dir + "/flight.rank1.json"}, "flight.rank1.json", "outside the world of 1 ranks", 1);
  }
  SECTION("an empty run directory") {
    const std::string empty = test::temp_dir("hang-empty");
    refused({empty}, empty, "no flight.rank*.json");
  }
}

TEST_CASE("hang-diagnose: a rank that skipped a collective of another group (TP) is named for the skip", "[hang-diagnose]") {
  // Rank 2 skipped tp seq 11, so its queue never reached dp seq 11, where rank 0 waited first. The
  // block followed is dp's; rank 2 is not "outside any collective" (its skip is in its record).
  const auto history = completed_steps(5);  // seq 1..10 in each group
  const std::vector<int> dp = {0, 2}, tp = {1, 2};
  auto late = [](std::uint64_t seq, double t) { return Entry{seq, "timed_out", 6, "backward", "AllReduce", 1024, t}; };
  const Diagnosis d = run({Dump(0, 3, "timeout", kDumpedAt).timed_out("dp", 11).group("dp", dp, 0, plus(history, {late(11, kT0 + 11)})),
                           Dump(1, 3, "timeout", kDumpedAt).timed_out("tp", 11).group("tp", tp, 0, plus(history, {late(11, kT0 + 50)})),
                           Dump(2, 3, "timeout", kDumpedAt).timed_out("tp", 11)
                               .group("dp", dp, 1, history)
                               .group("tp", tp, 1, plus(history, {{11, "skipped", 6}}))});
  CHECK(d.verdict == Verdict::kHang);
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == 2);
  CHECK(d.culprit->cause == hang::Cause::kSkipped);
  CHECK_THAT(d.culprit->evidence, Catch::Contains("skipped tp seq 11") && Catch::Contains("never joined dp seq 11"));
  CHECK(d.to_json()["summary"]["class"] == "skipped-collective");
  CHECK(d.to_json()["summary"]["culprit_rank"] == 2);
}
