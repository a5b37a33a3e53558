// One fuzz target per reader of outside bytes (issue 50): a file in fuzz/targets/ that feeds the
// input to the project's real reader entry point through SHARDTRAIN_FUZZ_TARGET(name). Built two
// ways from the same file (fuzz/CMakeLists.txt):
//   * with SHARDTRAIN_LIBFUZZER defined (clang, SHARDTRAIN_FUZZ=ON): the body becomes libFuzzer's
//     LLVMFuzzerTestOneInput, one binary fuzz-<name> per target (scripts/fuzz.sh runs them);
//   * otherwise: the body registers itself under <name> in fuzz_replay, whose small driver feeds it
//     every file of testdata/fuzz/<name>/ (the seeds and every input that ever crashed it) in the
//     normal ctest run, with the normal compiler.
// The contract a target checks is expect_reader_contract's (fuzz_support.hpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"

#ifdef SHARDTRAIN_LIBFUZZER
#define SHARDTRAIN_FUZZ_TARGET(name)                                                          \
  static void shardtrain_fuzz_body(const std::uint8_t* data, std::size_t size);               \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {         \
    shardtrain_fuzz_body(data, size);                                                         \
    return 0;                                                                                 \
  }                                                                                           \
  static void shardtrain_fuzz_body(const std::uint8_t* data, std::size_t size)
#else
#define SHARDTRAIN_FUZZ_TARGET(name)                                                          \
  static void shardtrain_fuzz_body_##name(const std::uint8_t* data, std::size_t size);        \
  [[maybe_unused]] static const bool shardtrain_fuzz_registered_##name =                      \
      ::shardtrain::fuzz::register_target(#name, shardtrain_fuzz_body_##name);                \
  static void shardtrain_fuzz_body_##name(const std::uint8_t* data, std::size_t size)
#endif
