// Comm engine tests that need no MPI: phases (the process-wide current phase and its names).
#include <catch2/catch.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/phase.hpp"

using namespace shardtrain;

TEST_CASE("comm engine: phase names round-trip and bad names are refused naming the choices", "[comm]") {
  const Phase all[] = {Phase::kSetup,      Phase::kResume,     Phase::kData,
                       Phase::kForward,    Phase::kBackward,   Phase::kOptimizer,
                       Phase::kCheckpoint, Phase::kEvaluation, Phase::kFinish};
  const char* names[] = {"setup", "resume", "data", "forward", "backward", "optimizer", "ckpt", "eval", "finish"};
  for (int i = 0; i < kNumPhases; ++i) {
    CHECK(std::string(phase_name(all[i])) == names[i]);
    CHECK(parse_phase(names[i]) == all[i]);
  }
  CHECK_THROWS_AS(parse_phase("lunch"), UsageError);
  CHECK_THROWS_WITH(parse_phase("lunch"),
                    "phase 'lunch' is not one of setup, resume, data, forward, backward, optimizer, ckpt, eval, finish");
  CHECK_THROWS_AS(parse_phase(""), UsageError);
  CHECK_THROWS_AS(parse_phase("Forward"), UsageError);  // names are exact
}

TEST_CASE("comm engine: PhaseScope sets the process-wide phase and restores the one before", "[comm]") {
  set_phase(Phase::kData);
  {
    PhaseScope outer(Phase::kForward);
    CHECK(current_phase() == Phase::kForward);
    {
      PhaseScope inner(Phase::kCheckpoint);
      CHECK(current_phase() == Phase::kCheckpoint);
    }
    CHECK(current_phase() == Phase::kForward);
  }
  CHECK(current_phase() == Phase::kData);
  set_phase(Phase::kSetup);
}
