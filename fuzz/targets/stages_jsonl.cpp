// Fuzz target: a pipeline run's stages.jsonl, through its two readers: the pipeline's
// stage_record_from_json_line (each line; nullopt for a line that is not a stage record) and
// measure_costs (release-gate costs RUN_DIR, whose local figures come from it).
#include <sstream>

#include "fuzz_target.hpp"
#include "shardtrain/pipeline/pipeline.hpp"
#include "shardtrain/release/cost_accounting.hpp"

SHARDTRAIN_FUZZ_TARGET(stages_jsonl) {
  using namespace shardtrain;
  const std::string text(fuzz::as_text(data, size));
  const std::string path = fuzz::write_input("stages-run/stages.jsonl", text);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    fuzz::expect_reader_contract(path, [&] { (void)pipeline::stage_record_from_json_line(line); });
  const std::string run = fuzz::scratch_dir() + "/stages-run";
  fuzz::expect_reader_contract("stages.jsonl", [&] { (void)measure_costs(run); });
}
