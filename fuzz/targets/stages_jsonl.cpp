// Fuzz target: a pipeline run's stages.jsonl, through its one reader (read_stage_records,
// telemetry/stage_record.hpp: the pipeline's and the cost table's) and measure_costs
// (release-gate costs RUN_DIR, whose local figures come from it).
#include "fuzz_target.hpp"
#include "shardtrain/decision/cost_accounting.hpp"
#include "shardtrain/telemetry/stage_record.hpp"

SHARDTRAIN_FUZZ_TARGET(stages_jsonl) {
  using namespace shardtrain;
  const std::string text(fuzz::as_text(data, size));
  const std::string path = fuzz::write_input("stages-run/stages.jsonl", text);
  fuzz::expect_reader_contract(path, [&] { (void)read_stage_records(path); });
  const std::string run = fuzz::scratch_dir() + "/stages-run";
  fuzz::expect_reader_contract("stages.jsonl", [&] { (void)measure_costs(run); });
}
