// Test runner: Catch2's session, plus the GPU gate: a run that selects [gpu] cases on a machine
// without a CUDA device prints why and exits 77, which ctest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "shardtrain/backend/backend.hpp"
#include "test_support.hpp"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "[gpu]" && !shardtrain::cuda_backend_available()) {
      std::printf("SKIPPED [gpu] tests: %s\n",
#ifdef SHARDTRAIN_HAVE_CUDA
                  "this build has the CUDA backend but no CUDA device is visible"
#else
                  "this is a CPU-only build (no nvcc found, or -DSHARDTRAIN_CUDA=OFF)"
#endif
      );
      return 77;
    }
  }
  int result = Catch::Session().run(argc, argv);
  shardtrain::test::finalize_mpi_if_started();
  return result;
}
