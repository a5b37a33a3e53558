// Fuzz target: the collectives sweep (scale-bench collectives --json), through scaling::read_collectives.
#include "fuzz_target.hpp"
#include "shardtrain/scaling/fit.hpp"

SHARDTRAIN_FUZZ_TARGET(collectives_sweep) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("collectives.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { scaling::read_collectives(path, ""); });
}
