// Fuzz target: the cost table (RUN_DIR/costs.json), through CostTable::read.
#include "fuzz_target.hpp"
#include "shardtrain/decision/costs.hpp"

SHARDTRAIN_FUZZ_TARGET(cost_table) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("costs.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { CostTable::read(path); });
}
