// Test runner: Catch2's session, plus the gate of the cases that need what a machine may lack
// (test_support.hpp, missing_requirement): a run that selects [gpu], [needs-tmpfs] or
// [needs-h5dump] on a machine without a CUDA device, mount rights or h5dump prints why and exits
// 77, which ctest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "test_support.hpp"

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
