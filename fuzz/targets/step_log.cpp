// Fuzz target: a step log (steps.rank<R>.jsonl), through read_step_log, the format's one reader, both repeat rules.
#include "fuzz_target.hpp"
#include "shardtrain/telemetry/step_log.hpp"

SHARDTRAIN_FUZZ_TARGET(step_log) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("steps.rank0.jsonl", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { read_step_log(path); read_step_log(path, Repeats::kKeepAll); });
}
