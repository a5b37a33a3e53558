// Fuzz target: a TensorBoard event file (RUN_DIR/tensorboard/rank_<R>/events.out.tfevents.*), through
// read_tensorboard_event_file, the format's one reader, and the restart rule that rewrites it
// (keep_tensorboard_steps_before, which reads every event file of its folder the same way).
#include "fuzz_target.hpp"
#include "shardtrain/telemetry/tensorboard_events.hpp"

SHARDTRAIN_FUZZ_TARGET(tensorboard_events) {
  using namespace shardtrain;
  const std::string path = fuzz::write_input("tensorboard/events.out.tfevents.1796594450.fuzz.1.0", fuzz::as_text(data, size));
  fuzz::expect_reader_contract(path, [&] { read_tensorboard_event_file(path); });
  const std::string folder = fuzz::scratch_dir() + "/tensorboard";
  fuzz::expect_reader_contract(folder, [&] { keep_tensorboard_steps_before(folder, 2); });
}
