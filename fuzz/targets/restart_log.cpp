// Fuzz target: the resilient launcher's restart log, through launch::read_restart_log.
#include "fuzz_target.hpp"
#include "shardtrain/launch/restart_log.hpp"

SHARDTRAIN_FUZZ_TARGET(restart_log) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("restarts.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { launch::read_restart_log(path); });
}
