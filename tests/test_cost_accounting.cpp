// The cost table measured from a pipeline run (decision/cost_accounting.hpp): Slurm's time and
// duration forms, sacct and scontrol output as the two Slurm sources print it, and a --local run's
// stage records, read back through the table's one reader (decision/costs.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/decision/cost_accounting.hpp"
#include "shardtrain/decision/costs.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("cost accounting: a --local run's stage records give the table costs.hpp reads", "[costs]") {
  const std::string run = test::temp_dir("costs_local");
  {
    std::ofstream s(run + "/stages.jsonl");
    s << R"({"stage": "prep", "ranks": 1, "start": 0, "end": 2.5, "wall_s": 2.5, "exit_status": 0, "job_id": null})" << "\n";
    s << R"({"stage": "train", "ranks": 2, "start": 3, "end": 13, "wall_s": 10, "exit_status": 1, "job_id": null})" << "\n";
    s << R"({"stage": "costs", "ranks": 1, "start": 13, "end": 14, "wall_s": 1, "exit_status": 0, "job_id": null})" << "\n";
  }
  std::filesystem::create_directories(run + "/checkpoints/step_1");
  { std::ofstream(run + "/checkpoints/step_1/a.h5") << std::string(1000, 'x'); }
  { std::ofstream(run + "/data.h5") << std::string(300, 'd'); }
  const nlohmann::json costs = measure_costs(run);
  write_json_file(run + "/costs.json", costs);
  const CostTable t = CostTable::read(run + "/costs.json");
  CHECK(t.source == "local");
  CHECK(t.dataset_bytes == 300);
  CHECK(t.checkpoint_bytes == 1000);
  CHECK(t.preprocessing_s == Approx(2.5));
  REQUIRE(t.stages.size() == 2);  // the costs stage itself is not counted
  CHECK(t.stages[1].state == "FAILED");
  CHECK(t.stages[1].compute_core_s == Approx(20));
  CHECK(t.compute_core_s_total() == Approx(22.5));
  CHECK_THAT(costs_text(costs), Catch::Contains("total compute 22.5 core-s"));
  CHECK_THROWS_AS(measure_costs(run + "/none"), UsageError);
}
