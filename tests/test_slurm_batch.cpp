// A Slurm batch job's pure parts (issue 48: the logic train.sbatch held, now in run-resilient
// --slurm-batch): the environment -> the command and the launcher's options, and the time-limit
// stop's decisions and lines. Run for real by the Slurm end-to-end tests (slurm_chain,
// multinode_box).
#include <catch2/catch.hpp>

#include <map>

#include "shardtrain/base/error.hpp"
#include "shardtrain/launch/batch_job.hpp"
#include "shardtrain/launch/time_limit.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::launch;

namespace {

Environment env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> in_job(std::map<std::string, std::string> more = {}) {
  std::map<std::string, std::string> vars = {{"SLURM_JOB_ID", "42"}, {"SLURM_NTASKS", "4"},
                                             {"SLURM_SUBMIT_DIR", "/home/u/clone"}, {"SLURM_JOB_NAME", "train"}};
  for (auto& [k, v] : more) vars[k] = v;
  return vars;
}

}  // namespace

TEST_CASE("batch job: the environment's defaults make train.sbatch's documented command", "[slurm]") {
  const BatchJobSettings job = read_batch_job(env_of(in_job()), "/elsewhere");
  CHECK(job.job_id == "42");
  CHECK(job.ntasks == 4);
  CHECK(job.home == "/home/u/clone");
  CHECK(job.bin == "/home/u/clone/build/bin");
  CHECK(job.run_dir == "/home/u/clone/run/train-42");
  CHECK(job.steps == 200);
  CHECK(batch_job_command(job) ==
        std::vector<std::string>{"srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--ntasks", "4",
                                 "/home/u/clone/build/bin/ddp-train", "--data", "/home/u/clone/data/fortunes.h5",
                                 "--seq-len", "256", "--layers", "4", "--d-model", "256", "--heads", "4",
                                 "--global-batch", "16", "--micro-batch", "8", "--eval-samples", "128", "--steps", "200",
                                 "--ckpt-every", "50", "--keep", "3", "--resume", "auto", "--device", "cpu",
                                 "--deterministic", "--run-dir", "/home/u/clone/run/train-42"});
  const LauncherOptions o = batch_job_launcher_options(job);
  CHECK(o.policy.max_restarts == 5);
  CHECK(o.policy.backoff_s == 10);
  CHECK(o.policy.min_ranks == 1);
  CHECK(o.log_path == "/home/u/clone/run/train-42/restarts-42.0.json");
  CHECK(o.exclude_cmd == "/home/u/clone/scripts/slurm/exclude-node.sh");
  REQUIRE(o.slurm_batch);
  CHECK(o.slurm_batch->ranks_via_srun);
  CHECK(o.slurm_batch->time_limit.job_id == "42");
  CHECK(o.slurm_batch->time_limit.last_step == 200);
  CHECK(o.slurm_batch->time_limit.save_wait_s == 100);
  CHECK(o.capacity_cmd.empty());
  // The command is one the launcher accepts (run folder, rank count, global batch for elastic restarts).
  const ChildCommand command = ChildCommand::parse(batch_job_command(job));
  CHECK(command.rank_count() == 4);
  CHECK(command.global_batch() == 16);
  CHECK_NOTHROW(o.validate(command));
}

TEST_CASE("batch job: every variable reaches its place, the requeued run keeps the folder and logs apart", "[slurm]") {
  const BatchJobSettings job = read_batch_job(
      env_of(in_job({{"SHARDTRAIN_HOME", "/c"}, {"SHARDTRAIN_BIN", "/b"}, {"RUN_DIR", "/r"}, {"DATA", "/d.h5"},
                     {"STEPS", "20000"}, {"SEQ_LEN", "64"}, {"MODEL", " --layers 2  --global-batch 8 "},
                     {"CKPT_EVERY", "7"}, {"DEVICE", "cuda"}, {"DETERMINISTIC", "0"}, {"TRAINER", "fsdp-train"},
                     {"TRAIN_ARGS", "--zero-stage 3 --cutoff 2024-01-01T00:00:00Z"}, {"LAUNCHER", "mpirun"},
                     {"MIN_RANKS", "2"}, {"MAX_RESTARTS", "0"}, {"SAVE_WAIT", "40"}, {"SLURM_RESTART_COUNT", "3"}})),
      "/w");
  CHECK(batch_job_command(job) ==
        std::vector<std::string>{"mpirun", "-np", "4", "/b/fsdp-train", "--data", "/d.h5", "--seq-len", "64", "--layers", "2",
                                 "--global-batch", "8", "--steps", "20000", "--ckpt-every", "7", "--keep", "3", "--resume",
                                 "auto", "--device", "cuda", "--zero-stage", "3", "--cutoff", "2024-01-01T00:00:00Z",
                                 "--run-dir", "/r"});
  const LauncherOptions o = batch_job_launcher_options(job);
  CHECK(o.log_path == "/r/restarts-42.3.json");
  CHECK(o.policy.min_ranks == 2);
  CHECK(o.policy.max_restarts == 0);
  CHECK(o.exclude_cmd == "/c/scripts/slurm/exclude-node.sh");
  CHECK_FALSE(o.slurm_batch->ranks_via_srun);
  CHECK(o.slurm_batch->time_limit.save_wait_s == 40);
  CHECK(o.slurm_batch->time_limit.last_step == 20000);
  // No submit folder: the working folder stands in.
  const BatchJobSettings bare = read_batch_job(env_of({{"SLURM_JOB_ID", "7"}}), "/w");
  CHECK(bare.run_dir == "/w/run/shardtrain-7");
  CHECK(bare.ntasks == 1);
}

TEST_CASE("batch job: a bad variable is refused naming it, before anything runs", "[slurm]") {
  const auto refused = [](std::map<std::string, std::string> more) {
    return test::usage_error_of([&] { read_batch_job(env_of(in_job(std::move(more))), "/w"); });
  };
  CHECK_THROWS_WITH(read_batch_job(env_of({}), "/w"),
                    "not inside a Slurm job: submit scripts/slurm/train.sbatch with sbatch (see its --help)");
  CHECK(refused({{"TRAIN_ARGS", "--steps 5"}}) ==
        "TRAIN_ARGS sets --steps, which train.sbatch already sets: use the variable for it (STEPS, SEQ_LEN, MODEL, "
        "CKPT_EVERY, DEVICE, DETERMINISTIC; see train.sbatch --help)");
  CHECK(refused({{"TRAIN_ARGS", "--layers=2"}}).rfind("TRAIN_ARGS sets --layers, which train.sbatch already sets", 0) == 0);
  CHECK(refused({{"TRAIN_ARGS", "--run-dir /x"}}) == "TRAIN_ARGS sets --run-dir: set RUN_DIR instead");
  CHECK(refused({{"MIN_RANKS", "5"}}) == "MIN_RANKS=5 is above the job's 4 tasks (sbatch -n)");
  CHECK(refused({{"MIN_RANKS", "0"}}) == "MIN_RANKS='0' is not a whole number in [1, 1000000]");
  CHECK(refused({{"STEPS", "2e3"}}) == "STEPS='2e3' is not a whole number in [1, 1099511627776]");
  CHECK(refused({{"STEPS", "-1"}}).rfind("STEPS='-1' is not a whole number", 0) == 0);
  CHECK(refused({{"SAVE_WAIT", "soon"}}) == "SAVE_WAIT='soon' is not a number of seconds in [0, 86400]");
  CHECK(refused({{"LAUNCHER", "ssh"}}) == "LAUNCHER must be srun or mpirun (got 'ssh')");
  CHECK(refused({{"TRAINER", "train"}}) == "TRAINER must be ddp-train or fsdp-train (got 'train')");
  CHECK(refused({{"DETERMINISTIC", "yes"}}).rfind("DETERMINISTIC must be 1", 0) == 0);
  CHECK(refused({{"SLURM_NTASKS", "0"}}).rfind("SLURM_NTASKS='0'", 0) == 0);
  CHECK(refused({{"TRAIN_ARGS", "--zero-stage 2"}}) == "accepted");
}

TEST_CASE("time limit: a checkpoint after the warning, the ranks given their grace, then requeued", "[slurm]") {
  TimeLimitStop stop({"42", 100, 30, 200});
  CHECK_FALSE(stop.begun());
  CHECK(stop.poll(1000, "step_00000050").lines.empty());  // nothing before the warning
  const std::string first = stop.begin(1000, "step_00000050");
  CHECK(first.find(" time limit near: asking every rank to checkpoint (latest: step_00000050)") != std::string::npos);
  CHECK(stop.begin(1001, "step_00000050").empty());  // once
  CHECK(stop.poll(1005, "step_00000050").lines.empty());
  const TimeLimitStop::Poll saved = stop.poll(1012, "step_00000061");
  CHECK(saved.lines == std::vector<std::string>{"checkpoint step_00000061 committed after 12s"});
  CHECK_FALSE(saved.end_attempt);
  CHECK(stop.poll(1030, "step_00000061").lines.empty());  // said once
  CHECK_FALSE(stop.poll(1041, "step_00000061").end_attempt);
  CHECK(stop.poll(1042, "step_00000061").end_attempt);  // 30 s after the checkpoint
  const TimeLimitStop::Ending e = stop.finish(1043, "step_00000061");
  CHECK(e.requeue);
  REQUIRE(e.lines.size() == 1);
  CHECK(e.lines[0].find(" requeueing job 42") != std::string::npos);
}

TEST_CASE("time limit: no checkpoint within SAVE_WAIT, ranks that end first, and a run already done", "[slurm]") {
  {
    TimeLimitStop stop({"42", 100, 30, 200});
    stop.begin(0, "");
    const TimeLimitStop::Poll waited = stop.poll(100, "");
    CHECK(waited.lines ==
          std::vector<std::string>{"no new checkpoint after 100s (SAVE_WAIT): requeueing anyway; the job resumes from the start"});
    CHECK(stop.poll(130, "").end_attempt);
    const TimeLimitStop::Ending e = stop.finish(131, "");
    CHECK(e.requeue);
    CHECK(e.lines.size() == 1);  // the wait was already reported
  }
  {
    TimeLimitStop stop({"42", 100, 30, 200});
    stop.begin(0, "step_00000150");
    const TimeLimitStop::Ending e = stop.finish(3, "step_00000150");  // the ranks were gone already
    CHECK(e.requeue);
    CHECK(e.lines.front() ==
          "the ranks ended without a new checkpoint (the signal came before they could save): requeueing; the job "
          "resumes from step_00000150");
  }
  {
    TimeLimitStop stop({"42", 100, 30, 200});
    stop.begin(0, "step_00000150");
    const TimeLimitStop::Ending e = stop.finish(9, "step_00000200");  // the last step's checkpoint
    CHECK_FALSE(e.requeue);
    CHECK(e.lines == std::vector<std::string>{"checkpoint step_00000200 committed after 9s",
                                              "training reached step 200: done, not requeued"});
  }
  CHECK(checkpoint_step("step_00000120") == 120);
  CHECK_FALSE(checkpoint_step("step_"));
  CHECK_FALSE(checkpoint_step("step_12a"));
  CHECK_FALSE(checkpoint_step("latest"));
}
