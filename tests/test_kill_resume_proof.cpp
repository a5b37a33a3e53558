// The kill-and-resume proof's plan (launch/kill_plan.hpp) and verdict (launch/kill_resume_proof.hpp):
// the plan drawn from a seed and read from a file, and the verdict of made-up runs, one per way the
// proof can hold, lose progress or find its harness inconsistent.
#include <catch2/catch.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/launch/kill_plan.hpp"
#include "shardtrain/launch/kill_resume_proof.hpp"

using namespace shardtrain;
using namespace shardtrain::launch;

namespace {

FiredKill fired(int index, int attempt, KillMode mode = KillMode::kStep) {
  FiredKill k;
  k.index = index;
  k.rank = 1;
  k.attempt = attempt;
  k.mode = mode;
  return k;
}

RestartRecord restart(int attempt, int previous_status) {
  RestartRecord r;
  r.attempt = attempt;
  r.previous_exit_status = previous_status;
  return r;
}

// A run of two step kills, each ending its attempt, finished and BITWISE.
ProofRun good_run() {
  ProofRun run;
  run.world = 2;
  run.steps = 24;
  run.kills = 2;
  run.origin = "seed 1";
  run.final_checkpoint = "step_00000024";
  run.equiv_verdict = "BITWISE";
  run.tensors_compared = 30;
  run.fired = {fired(1, 0), fired(2, 1)};
  run.restarts.restarts = {restart(1, 137), restart(2, 137)};
  return run;
}

}  // namespace

TEST_CASE("kill plan: a seed gives one plan, sorted steps in range, the planned modes and losses", "[launch]") {
  KillPlanShape shape;
  shape.seed = 7;
  shape.kills = 5;
  shape.world = 4;
  shape.steps = 30;
  shape.save_kills = 2;
  shape.shrink = {3, 2};
  shape.global_batch = 12;
  const auto a = draw_kill_plan(shape);
  CHECK(a == draw_kill_plan(shape));
  REQUIRE(a.size() == 5);
  int saves = 0;
  std::vector<int> losses;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].step >= 2);
    CHECK(a[i].step <= 28);
    if (i) CHECK(a[i].step > a[i - 1].step);
    saves += a[i].mode == KillMode::kDuringSave;
    if (a[i].capacity) {
      losses.push_back(*a[i].capacity);
      CHECK(a[i].mode == KillMode::kStep);  // a node loss is never a save kill
    }
  }
  CHECK(saves == 2);
  CHECK(losses == std::vector<int>{3, 2});
  CHECK_NOTHROW(check_kill_plan(a, 4, 30, 12));
  shape.seed = 8;
  CHECK(draw_kill_plan(shape) != a);
}

TEST_CASE("kill plan: shapes that cannot hold their kills are refused", "[launch]") {
  KillPlanShape shape;
  shape.kills = 2;
  shape.save_kills = 2;
  shape.shrink = {1};
  CHECK_THROWS_AS(draw_kill_plan(shape), UsageError);
  shape = KillPlanShape{};
  shape.kills = 30;  // more kills than steps
  CHECK_THROWS_WITH(draw_kill_plan(shape), Catch::Contains("30 kills cannot hold"));
}

TEST_CASE("kill plan: read from a file, and bad lines and impossible kills named", "[launch]") {
  const auto p = parse_kill_plan("# rank step mode capacity\n1 4 step -\n0 7 during-save -  # a write\n1 9 step 1\n", "plan.txt");
  REQUIRE(p.size() == 3);
  CHECK(p[1].mode == KillMode::kDuringSave);
  CHECK(p[2].capacity == 1);
  CHECK_NOTHROW(check_kill_plan(p, 2, 24, 8));
  CHECK_THROWS_WITH(parse_kill_plan("1 4 sideways -\n", "plan.txt"), Catch::Contains("plan.txt line 1: expected"));
  CHECK_THROWS_WITH(parse_kill_plan("# nothing\n", "plan.txt"), Catch::Contains("no kills"));
  CHECK_THROWS_WITH(check_kill_plan(parse_kill_plan("3 4 step -\n", "f"), 2, 24, 8), Catch::Contains("only 2 ranks run then"));
  CHECK_THROWS_WITH(check_kill_plan(parse_kill_plan("1 5 step -\n0 5 step -\n", "f"), 2, 24, 8),
                    Catch::Contains("steps must increase"));
  CHECK_THROWS_WITH(check_kill_plan(parse_kill_plan("1 5 step 3\n", "f"), 4, 24, 8), Catch::Contains("does not divide"));
  CHECK_THROWS_WITH(check_kill_plan(parse_kill_plan("1 5 step 2\n", "f"), 2, 24, 8), Catch::Contains("must be below"));
}

TEST_CASE("kill-resume verdict: a finished BITWISE run with every kill accounted for holds", "[launch]") {
  const ProofRun run = good_run();
  const ProofVerdict v = judge_proof(run);
  CHECK(v.holds());
  CHECK_THAT(v.text(run), Catch::Contains("PROOF HOLDS: step_00000024 BITWISE; 2 restarts for 2 kills"));
}

TEST_CASE("kill-resume verdict: a final checkpoint that differs is progress lost", "[launch]") {
  ProofRun run = good_run();
  run.equiv_verdict = "DIFFERENT";
  const ProofVerdict v = judge_proof(run);
  CHECK_FALSE(v.invariant_holds());
  CHECK_THAT(v.lost.front(), Catch::Contains("is not BITWISE"));
  run = good_run();
  run.run_status = 1;
  CHECK_THAT(judge_proof(run).lost.front(), Catch::Contains("did not finish (exit 1)"));
}

TEST_CASE("kill-resume verdict: a mid-write kill must resume from the checkpoint latest named", "[launch]") {
  ProofRun run = good_run();
  run.fired[0].mode = KillMode::kDuringSave;
  run.fired[0].interrupted = "step_00000006";
  run.fired[0].latest_at_kill = "step_00000003";
  run.fired[0].write_committed = false;
  run.save_kills = 1;
  run.resumed_with = {{1, "step_00000003"}};
  CHECK(judge_proof(run).holds());
  run.resumed_with = {{1, "step_00000006"}};  // the interrupted write itself
  CHECK_THAT(judge_proof(run).lost.front(), Catch::Contains("resumed from the interrupted step_00000006"));
  run.resumed_with = {{1, "step_00000000"}};  // an older one: steps redone, the run's record lost
  CHECK_THAT(judge_proof(run).lost.front(), Catch::Contains("not the previous valid checkpoint step_00000003"));
  run.resumed_with = {};
  CHECK_THAT(judge_proof(run).lost.front(), Catch::Contains("did not resume from a checkpoint"));
}

TEST_CASE("kill-resume verdict: node losses must change the world size as planned and be logged", "[launch]") {
  ProofRun run = good_run();
  run.world = 4;
  run.shrink = {2};
  run.fired[1].lost = 2;
  run.restarts.restarts[1].world = WorldChange{4, 2, std::string("capacity 2 ranks (--capacity-cmd)")};
  run.restarts.restarts[0].world = WorldChange{4, 4, std::nullopt};
  CHECK(judge_proof(run).holds());
  run.restarts.restarts[1].world = WorldChange{4, 4, std::nullopt};  // the launcher kept 4 ranks
  const ProofVerdict v = judge_proof(run);
  CHECK_FALSE(v.invariant_holds());
  CHECK_THAT(v.lost.front(), Catch::Contains("world sizes changed to [], planned [2]"));
}

TEST_CASE("kill-resume verdict: a harness that did not do what it planned says nothing was lost", "[launch]") {
  ProofRun run = good_run();
  run.kills = 3;  // one planned kill never fired
  ProofVerdict v = judge_proof(run);
  CHECK(v.invariant_holds());
  CHECK_FALSE(v.holds());
  CHECK_THAT(v.harness.front(), Catch::Contains("2 of 3 planned kills fired"));
  run = good_run();
  run.fired[1].attempt = 0;  // two kills in one attempt
  CHECK_THAT(judge_proof(run).harness.front(), Catch::Contains("two kills hit one attempt"));
  run = good_run();
  run.restarts.restarts.pop_back();  // fewer restarts than kills
  CHECK_FALSE(judge_proof(run).holds());
  run = good_run();
  run.fired[0].mode = KillMode::kDuringSave;
  run.fired[0].interrupted = "step_00000006";
  run.fired[0].write_committed = true;  // the write committed before the kill landed
  run.save_kills = 1;
  CHECK_THAT(judge_proof(run).harness.front(), Catch::Contains("committed anyway"));
}
