// Fuzz target: the fitted step model (scale-bench fit), through scaling::read_step_model.
#include "fuzz_target.hpp"
#include "shardtrain/stepmodel/step_model.hpp"

SHARDTRAIN_FUZZ_TARGET(step_model) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("model.json", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { scaling::read_step_model(path, "the step model"); });
}
