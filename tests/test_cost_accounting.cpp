// The cost table measured from a pipeline run (release/cost_accounting.hpp): Slurm's time and
// duration forms, sacct and scontrol output as the two Slurm sources print it, and a --local run's
// stage records, read back through the table's one reader (release/costs.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/release/cost_accounting.hpp"
#include "shardtrain/release/costs.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("cost accounting: Slurm durations and times", "[costs]") {
  CHECK(slurm_duration_s("00:01:05") == 65);
  CHECK(slurm_duration_s("1-02:00:00") == 86400 + 7200);
  CHECK(slurm_duration_s("3:07") == 187);
  CHECK_FALSE(slurm_time("Unknown"));
  CHECK_FALSE(slurm_time("None"));
  CHECK_FALSE(slurm_time(""));
  const auto a = slurm_time("2026-12-04T03:00:00"), b = slurm_time("2026-12-04T03:01:30");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*b - *a == 90);
}

TEST_CASE("cost accounting: sacct runs of a requeued job, and scontrol's record", "[costs]") {
  const auto runs = parse_sacct(
      "41|REQUEUED|2026-12-04T03:00:00|2026-12-04T03:00:10|2026-12-04T03:00:12|2026-12-04T03:01:00|48|2\n"
      "41|COMPLETED|2026-12-04T03:01:00|2026-12-04T03:01:00|2026-12-04T03:01:05|2026-12-04T03:02:00|55|2\n"
      "42|CANCELLED by 0|2026-12-04T03:00:00|Unknown|None|2026-12-04T03:00:01|0|1\n"
      "garbage line\n");
  REQUIRE(runs.at("41").size() == 2);
  CHECK(runs.at("41")[0].queue_wait_s() == 12);
  CHECK(runs.at("41")[0].resource_wait_s() == 2);
  CHECK(runs.at("41")[1].run_s == 55);
  CHECK(runs.at("42")[0].state == "CANCELLED");
  CHECK_FALSE(runs.at("42")[0].queue_wait_s());
  const auto job = parse_scontrol_job(
      "JobId=43 JobName=x JobState=COMPLETED Reason=None Restarts=1 SubmitTime=2026-12-04T03:00:00 "
      "EligibleTime=2026-12-04T03:00:03 StartTime=2026-12-04T03:00:04 EndTime=2026-12-04T03:00:20 RunTime=00:00:16 "
      "NumCPUs=2\n");
  REQUIRE(job);
  CHECK(job->run_s == 16);
  CHECK(job->cpus == 2);
  CHECK(job->restarts == 1);
  CHECK(job->queue_wait_s() == 4);
  const auto pending = parse_scontrol_job("JobId=44 JobState=PENDING Reason=Dependency SubmitTime=2026-12-04T03:00:00 "
                                          "StartTime=2026-12-05T00:00:00 RunTime=00:00:00 NumCPUs=1");
  REQUIRE(pending);
  CHECK_FALSE(pending->start);  // a start time that is only a forecast
}

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
