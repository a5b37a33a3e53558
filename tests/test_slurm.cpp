// The slurm layer's readings of what Slurm tells a job (pure): the task list, the live ranks,
// srun's MPI plugins, sacct's and scontrol's records of a job's runs, the states a job does not
// leave, a chain job's sbatch command, the pending reasons that never clear and the chain's job list. The commands themselves run in the Slurm end-to-end tests (slurm_chain, multinode_box).
#include <catch2/catch.hpp>

#include <fstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/slurm/accounting.hpp"
#include "shardtrain/slurm/allocation.hpp"
#include "shardtrain/slurm/job_control.hpp"
#include "shardtrain/slurm/job_list.hpp"
#include "shardtrain/slurm/submit.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("slurm: SLURM_TASKS_PER_NODE expands to one count per node, malformed text is refused by name", "[slurm]") {
  CHECK(slurm::parse_tasks_per_node("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(slurm::parse_tasks_per_node("8") == std::vector<int>{8});
  CHECK(slurm::parse_tasks_per_node("1,4(x2)") == std::vector<int>{1, 4, 4});
  for (const char* bad : {"", "2(x3", "2x3", "a", "2,,1", "-1", "2(x0)", "1234567"}) {
    INFO(bad);
    CHECK_THROWS_WITH(slurm::parse_tasks_per_node(bad),
                      "SLURM_TASKS_PER_NODE '" + std::string(bad) + "' is not Slurm's task list (e.g. 2(x3),1)");
  }
}

TEST_CASE("slurm: the live ranks are the tasks of the job's nodes that are still listed", "[slurm]") {
  const std::vector<std::string> nodes = {"n1", "n2", "n3"};
  const std::vector<int> tasks = {2, 2, 1};
  CHECK(slurm::live_task_count(nodes, tasks, {"n1", "n2", "n3"}) == 5);
  CHECK(slurm::live_task_count(nodes, tasks, {"n1", "n3"}) == 3);  // n2 lost
  CHECK(slurm::live_task_count(nodes, tasks, {}) == 0);
  CHECK(slurm::live_task_count(nodes, {2}, {"n1", "n2"}) == 2);  // a node past the counts holds none
  CHECK(slurm::live_task_count(nodes, tasks, {"elsewhere"}) == 0);
}

TEST_CASE("slurm: srun --mpi=list's plugins are matched as whole words", "[slurm]") {
  CHECK(slurm::lists_mpi_plugin("none pmi2 pmix", "pmix"));
  CHECK_FALSE(slurm::lists_mpi_plugin("none pmi2", "pmix"));
  CHECK_FALSE(slurm::lists_mpi_plugin("none pmix_v4", "pmix"));
  CHECK_FALSE(slurm::lists_mpi_plugin("", "pmix"));
}

TEST_CASE("slurm: Slurm's durations and times", "[slurm]") {
  CHECK(slurm::parse_duration_s("00:01:05") == 65);
  CHECK(slurm::parse_duration_s("1-02:00:00") == 86400 + 7200);
  CHECK(slurm::parse_duration_s("3:07") == 187);
  CHECK_FALSE(slurm::parse_time("Unknown"));
  CHECK_FALSE(slurm::parse_time("None"));
  CHECK_FALSE(slurm::parse_time(""));
  const auto a = slurm::parse_time("2026-12-04T03:00:00"), b = slurm::parse_time("2026-12-04T03:01:30");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*b - *a == 90);
}

TEST_CASE("slurm: sacct's runs of a requeued job, scontrol's record, and the states a job does not leave", "[slurm]") {
  const auto runs = slurm::parse_sacct(
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
  const auto job = slurm::parse_scontrol_job(
      "JobId=43 JobName=x JobState=COMPLETED Reason=None Restarts=1 SubmitTime=2026-12-04T03:00:00 "
      "EligibleTime=2026-12-04T03:00:03 StartTime=2026-12-04T03:00:04 EndTime=2026-12-04T03:00:20 RunTime=00:00:16 "
      "NumCPUs=2\n");
  REQUIRE(job);
  CHECK(job->run_s == 16);
  CHECK(job->cpus == 2);
  CHECK(job->restarts == 1);
  CHECK(job->queue_wait_s() == 4);
  const auto pending = slurm::parse_scontrol_job("JobId=44 JobState=PENDING Reason=Dependency SubmitTime=2026-12-04T03:00:00 "
                                          "StartTime=2026-12-05T00:00:00 RunTime=00:00:00 NumCPUs=1");
  REQUIRE(pending);
  CHECK_FALSE(pending->start);  // a start time that is only a forecast
  CHECK(slurm::scontrol_job_has_ended("JobId=5 JobName=x JobState=COMPLETED Reason=None"));
  CHECK(slurm::scontrol_job_has_ended("JobId=5 JobState=CANCELLED Reason=DependencyNeverSatisfied"));
  CHECK(slurm::scontrol_job_has_ended("slurm_load_jobs error: Invalid job id specified"));
  CHECK_FALSE(slurm::scontrol_job_has_ended("JobId=5 JobState=PENDING Reason=Dependency"));
  CHECK_FALSE(slurm::scontrol_job_has_ended("JobId=5 JobState=RUNNING Reason=None"));
  CHECK_FALSE(slurm::scontrol_job_has_ended("JobId=5 JobState=COMPLETING Reason=None"));
}

TEST_CASE("slurm: pending reasons that never clear, and those that do", "[slurm]") {
  for (const char* r : {"PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints", "InvalidAccount",
                        "InvalidQOS", "AccountNotAllowed", "QOSMaxCpuPerJobLimit", "AssocMaxNodesPerJobLimit"}) {
    INFO(r);
    CHECK(slurm::reason_never_clears(r));
  }
  for (const char* r : {"Resources", "Priority", "Dependency", "None", "QOSMaxJobsPerUserLimit", "BeginTime", ""}) {
    INFO(r);
    CHECK_FALSE(slurm::reason_never_clears(r));
  }
}

TEST_CASE("slurm: one sbatch command shape for every job of a chain, and the id it answers", "[slurm]") {
  CHECK(slurm::chain_job_argv({"--time=10", "--job-name=mine"}, "run-train", "/r/slurm-train-%j.out", 4, "afterok:7:8") ==
        std::vector<std::string>{"sbatch", "--parsable", "--open-mode=append", "--kill-on-invalid-dep=yes", "--time=10",
                                 "--job-name=mine", "--job-name=run-train", "--output=/r/slurm-train-%j.out", "--ntasks=4",
                                 "--dependency=afterok:7:8"});  // the chain's name and output come after the user's: they win
  CHECK(slurm::chain_job_argv({}, "x", "o", 1, "") ==
        std::vector<std::string>{"sbatch", "--parsable", "--open-mode=append", "--kill-on-invalid-dep=yes", "--job-name=x",
                                 "--output=o", "--ntasks=1"});
  CHECK(slurm::job_id_of("1234\n") == "1234");
  CHECK(slurm::job_id_of("1234;cluster2\n") == "1234");
  CHECK(slurm::job_id_of("") == "");
}

TEST_CASE("slurm: a chain's job list is read back as written, a missing file is no jobs", "[slurm]") {
  const std::string dir = test::temp_dir("job-list");
  const std::vector<slurm::ListedJob> jobs = {{"prep", "101"}, {"cycle-2/decide", "102"}, {"total", "103"}};
  slurm::write_job_list(dir + "/jobs.txt", jobs);
  CHECK(test::file_contents(dir + "/jobs.txt") == "prep 101\ncycle-2/decide 102\ntotal 103\n");
  auto back = slurm::read_job_list(dir + "/jobs.txt");
  REQUIRE(back.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back[i].stage == jobs[i].stage);
    CHECK(back[i].job_id == jobs[i].job_id);
  }
  // A line that is not "STAGE ID" (a note someone added) is passed over, not misread as a job.
  std::ofstream(dir + "/jobs.txt", std::ios::app) << "# resubmitted by hand 104\n\nextra\n";
  CHECK(slurm::read_job_list(dir + "/jobs.txt").size() == 3);
  CHECK(slurm::read_job_list(dir + "/none.txt").empty());
  CHECK(slurm::never_starting_message("pipeline cycles", {"7 cycle-1-train PartitionConfig"}) ==
        "pipeline cycles: cancelled the chain: these jobs can never start:\n  job 7 cycle-1-train PartitionConfig");
}
