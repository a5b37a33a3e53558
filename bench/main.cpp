// Runner of the micro-benchmarks (not tests: nothing here passes or fails on a time). Each
// benchmark is a hidden Catch2 case ("[.bench]"), run by its tag, e.g.
//   SHARDTRAIN_COMM_BENCH=1 mpirun -np 2 build/bench/shardtrain_bench "[comm-bench]"
// and prints its figures; docs/PERFORMANCE.md records the commands and what they measured.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "test_support.hpp"

int main(int argc, char** argv) {
  int result = Catch::Session().run(argc, argv);
  shardtrain::test::finalize_mpi_if_started();
  return result;
}
