// Test runner: Catch2's session, plus the gate of the cases that need what a machine may lack
// (test_support.hpp, missing_requirement): a run that selects [gpu], [needs-tmpfs] or
// [needs-h5dump] on a machine without a CUDA device, mount rights or h5dump prints why and exits
// 77, which ctest reports as skipped. Each test case starts as a new job of this process
// (FreshJobPerTestCase below).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "shardtrain/comm/flight_recorder.hpp"
#include "test_support.hpp"

namespace {

// The flight recorder remembers, per process, every trigger its dumps had and the groups of the
// last dump (a rank's later dumps keep its first failure). In a trainer that process is one job;
// here one process runs many cases, so a case that reads a flight record would read an earlier
// case's first failure whenever both ran in one process (ctest runs each case alone, so only a
// whole-tag run such as scripts/sanitize.sh's "[comm]" showed it). Every case starts clean.
struct FreshJobPerTestCase : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    shardtrain::forget_flight_triggers();
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(FreshJobPerTestCase)

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string why = shardtrain::test::missing_requirement(argv[i]);
    if (!why.empty()) {
      std::printf("SKIPPED %s tests: %s\n", argv[i], why.c_str());
      return 77;
    }
  }
  int result = Catch::Session().run(argc, argv);
  shardtrain::test::finalize_mpi_if_started();
  return result;
}
