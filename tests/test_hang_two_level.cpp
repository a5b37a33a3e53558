// hang-diagnose on the two-level collectives (comm/hierarchical.hpp, issue 47): flight records
// written by the project's own writer (the comm engine, the hierarchical communicator and the
// flight recorder, four ranks as threads on the fake transport, placed 2 nodes x 2 ranks as
// SHARDTRAIN_NODE_OF_RANK=a,a,b,b would place them), read back and diagnosed. Each fault of the
// flat fault matrix (a hang in compute, a skipped collective, a wrong count, a dead rank) is put on
// rank 3 in step 2 of a two-level all-reduce (one piece and pipelined) and of ZeRO's two-level
// reduce-scatter and all-gather; the verdict must name rank 3 and its host with the class the flat
// algorithm gets, and no other rank (its node peer, rank 2, and the ranks of the other node wait on
// it in the node, cross-node and node-gather stages, each its own group with its own sequence).
#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "fake_transport.hpp"
#include "shardtrain/base/host.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/comm/fault_injection.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/diagnose/flight_dump.hpp"
#include "shardtrain/diagnose/hang_diagnosis.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::hang;
using std::chrono::milliseconds;

namespace {

enum class Shape { kAllReduce, kPipelinedAllReduce, kReduceScatter, kAllGather };
enum class Fault { kHang, kSkip, kWrongCount, kDead };

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kAllReduce: return "all-reduce";
    case Shape::kPipelinedAllReduce: return "pipelined all-reduce";
    case Shape::kReduceScatter: return "ZeRO reduce-scatter";
    case Shape::kAllGather: return "ZeRO all-gather";
  }
  return "?";
}
const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kHang: return "hang";
    case Fault::kSkip: return "skip-collective";
    case Fault::kWrongCount: return "wrong-count";
    case Fault::kDead: return "dead rank";
  }
  return "?";
}

constexpr int kWorld = 4, kCulprit = 3, kFaultStep = 2;
// 65 elements: an all-reduce leaves a tail of one (65 = 2 x 32 + 1) that goes flat on "dp", so the
// flat stage of a two-level call is exercised too; the pipelined one cuts 2 x 32 into 4 chunks.
constexpr std::size_t kCount = 65;

// One job: step 1 runs one collective of `shape` on every rank (the history a wrong count is judged
// against), step 2 (phase backward) puts `fault` on rank 3:
//   hang: rank 3 never calls the collective (stuck in compute); once its peers have timed out it
//     writes a snapshot record (reason "signal", as mpirun's SIGTERM to a stuck rank makes it);
//   skip: skip-collective:rank=3,step=2 (its comm engines do not issue the first collective of
//     the step on each group);
//   wrong-count: wrong-count:rank=3,step=2 (its first collective of the step one element short);
//   dead: rank 3 never calls it and leaves no record (killed).
// The peers' records are the ones their engines write on the collective timeout (or on the
// disagreement the wrong count causes). Returns the records read back from the run directory.
DumpSet two_level_job(Shape shape, Fault fault, const std::string& dir) {
  const std::vector<std::string> labels = {"a", "a", "b", "b"};
  auto world = std::make_shared<test::FakeWorld>(kWorld);
  std::barrier peers_done(kWorld);
  forget_flight_triggers();  // the previous job's dumps (this helper runs once per section)
  set_current_step(kFaultStep);
  set_phase(Phase::kBackward);  // process-wide: every rank thread is "in backward"
  test::run_ranks(kWorld, [&](int r) {
    CommOptions o;
    o.name = "dp";
    o.timeout = milliseconds(300);
    o.teardown_grace = milliseconds(20);
    o.run_dir = dir;
    auto dp = make_communicator(world->transport(r), o);
    HierarchyOptions ho;
    if (shape == Shape::kPipelinedAllReduce) ho.pipeline_chunk_bytes = 16 * sizeof(float);  // 64 x 4 B: 4 chunks
    auto h = make_hierarchical_communicator(*dp, labels[std::size_t(r)], ho);
    std::vector<float> in(kCount * kWorld, 1.0f), out(kCount * kWorld, 0.0f);
    auto collective = [&] {
      switch (shape) {
        case Shape::kAllReduce:
        case Shape::kPipelinedAllReduce: h->all_reduce(in.data(), kCount); break;
        case Shape::kReduceScatter: h->reduce_scatter(in.data(), out.data(), kCount); break;
        case Shape::kAllGather: h->all_gather(in.data(), out.data(), kCount); break;
      }
    };
    h->set_step(1);
    collective();
    if (r == kCulprit && (fault == Fault::kSkip || fault == Fault::kWrongCount))
      h->set_fault_injection(FaultInjection::parse(
          {std::string(fault == Fault::kSkip ? "skip-collective" : "wrong-count") + ":rank=3,step=2,phase=backward"}));
    h->set_step(kFaultStep);
    const bool stays_out = r == kCulprit && (fault == Fault::kHang || fault == Fault::kDead);
    if (!stays_out) {
      try {
        collective();
      } catch (const CommunicationError&) {  // the timeout or disagreement, recorded in the dump
      }
    }
    peers_done.arrive_and_wait();
    if (r == kCulprit && fault == Fault::kHang)
      write_flight_record(dir + "/flight.rank3.json", r, kWorld, "signal", nullptr);
  });
  set_phase(Phase::kSetup);
  return load_flight_dumps({dir});
}

const std::vector<Shape> kShapes = {Shape::kAllReduce, Shape::kPipelinedAllReduce, Shape::kReduceScatter,
                                    Shape::kAllGather};

// The verdict of `fault` under the flat algorithm (tests/scripts/hang_matrix.sh at W=4).
struct Expected {
  Verdict verdict;
  hang::Cause cause;
  FailureClass failure_class;
};
Expected flat_verdict(Fault f) {
  switch (f) {
    case Fault::kHang: return {Verdict::kHang, hang::Cause::kOutsideCollective, FailureClass::kHangOutsideCollective};
    case Fault::kSkip: return {Verdict::kHang, hang::Cause::kSkipped, FailureClass::kSkippedCollective};
    case Fault::kWrongCount: return {Verdict::kMismatch, hang::Cause::kMismatch, FailureClass::kMismatch};
    case Fault::kDead: return {Verdict::kHang, hang::Cause::kNoDump, FailureClass::kDeadRank};
  }
  return {};
}

void check_names_rank_3(Shape shape, Fault fault) {
  INFO(fault_name(fault) << " in a two-level " << shape_name(shape));
  const std::string dir = test::temp_dir("hang-two-level");
  const DumpSet dumps = two_level_job(shape, fault, dir);
  const Diagnosis d = diagnose(dumps);
  INFO(d.text());
  const Expected want = flat_verdict(fault);
  CHECK(d.verdict == want.verdict);
  CHECK(d.candidates == std::vector<int>{kCulprit});  // the culprit, no victim beside it
  REQUIRE(d.culprit);
  CHECK(d.culprit->rank == kCulprit);
  CHECK(d.culprit->cause == want.cause);
  const DiagnosisSummary s = d.summary();
  CHECK(s.failure_class == want.failure_class);
  CHECK(s.culprit_rank == kCulprit);
  // The host its own record names; a dead rank left none (the launcher names it from mpirun).
  CHECK(s.culprit_host == (fault == Fault::kDead ? "" : host_name()));
  if (fault == Fault::kHang || fault == Fault::kWrongCount) {
    // A wrong count: the mismatched stage's step and phase, also when the first blocked collective
    // is a later stage of another group (the other node's ranks time out in the cross-node stage
    // before they are killed; fault_matrix_two_level's ddp_hier_wrong-count once got "step -").
    CHECK(s.phase == std::optional<std::string>("backward"));
    CHECK(s.step == std::optional<std::int64_t>(kFaultStep));
  } else if (fault != Fault::kWrongCount) {
    // The blocked collective is a stage of the step-2 call that rank 3 has in its node or
    // cross-node group, recorded as part of that call on "dp".
    REQUIRE(d.blocked);
    CHECK(d.blocked->step == kFaultStep);
    CHECK(d.blocked->phase == "backward");
    const bool culprit_member = std::count(d.blocked->not_joined.begin(), d.blocked->not_joined.end(), kCulprit) +
                                    std::count(d.blocked->no_dump.begin(), d.blocked->no_dump.end(), kCulprit) ==
                                1;
    CHECK(culprit_member);
  }
}

}  // namespace

TEST_CASE("hang-diagnose two-level: every stage's record names the call it belongs to", "[hang-diagnose]") {
  const std::string dir = test::temp_dir("hang-two-level-parts");
  const DumpSet dumps = two_level_job(Shape::kAllReduce, Fault::kDead, dir);
  REQUIRE(dumps.dumps.size() == 3);  // ranks 0..2; rank 3 is the dead one
  for (const RankDump& d : dumps.dumps) {
    INFO("rank " << d.rank);
    const DumpGroup* node = d.group("dp.node");
    const DumpGroup* cross = d.group("dp.cross");
    const DumpGroup* gather = d.group("dp.node-gather");
    REQUIRE(node);
    REQUIRE(cross);
    REQUIRE(gather);
    // The node groups are one per node: the same name, the members of this rank's node.
    CHECK(node->world_ranks == (d.rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}));
    CHECK(cross->world_ranks == (d.rank % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}));
    // Step 1's call is two-level collective 1 of "dp", step 2's is 2, in every stage's entry.
    for (const DumpGroup* g : {node, cross, gather})
      for (const DumpEntry& e : g->entries) {
        if (e.op == "Split") continue;
        REQUIRE(e.part_of);
        CHECK(e.part_of->group == "dp");
        CHECK(e.part_of->collective == std::uint64_t(e.step));
        CHECK(e.part_of->op == "AllReduce");
        CHECK(e.part_of->numel == kCount);
      }
    // The flat tail (1 element) is a stage of the same call; dp's own operations are not.
    const DumpGroup* dp = d.group("dp");
    REQUIRE(dp);
    int tails = 0;
    for (const DumpEntry& e : dp->entries)
      if (e.part_of) {
        ++tails;
        CHECK(e.numel == 1);
      }
    CHECK(tails == 2);
  }
}

TEST_CASE("hang-diagnose two-level: a rank hung in compute is named, not the ranks waiting in its stages",
          "[hang-diagnose]") {
  for (Shape shape : kShapes) check_names_rank_3(shape, Fault::kHang);
}

TEST_CASE("hang-diagnose two-level: a skipped collective names the skipping rank", "[hang-diagnose]") {
  for (Shape shape : kShapes) check_names_rank_3(shape, Fault::kSkip);
}

TEST_CASE("hang-diagnose two-level: a wrong count names the rank, its node peer outvoted by the other node",
          "[hang-diagnose]") {
  for (Shape shape : kShapes) check_names_rank_3(shape, Fault::kWrongCount);
}

TEST_CASE("hang-diagnose two-level: a dead rank is named from the stages its peers waited in", "[hang-diagnose]") {
  for (Shape shape : kShapes) check_names_rank_3(shape, Fault::kDead);
}
