#include "shardtrain/launch/batch_job.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/number_text.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/slurm/job_control.hpp"

namespace shardtrain::launch {
namespace {

namespace fs = std::filesystem;

// The options the variables set; TRAIN_ARGS may not set them again (the trainer would stop with
// CLI11's "At Most 1 required but received 2", which names neither the variable nor the fix).
const char* const kSetByVariables = "STEPS, SEQ_LEN, MODEL, CKPT_EVERY, DEVICE, DETERMINISTIC";
const char* const kDefaultModel = "--layers 4 --d-model 256 --heads 4 --global-batch 16 --micro-batch 8 --eval-samples 128";

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A whole number in [lo, hi] from variable `name` (base's strict reading: plain decimal, within
// 64 bits); UsageError naming it otherwise.
std::int64_t whole_number(const std::string& name, const std::string& text, std::int64_t lo, std::int64_t hi) {
  const bool readable = strict_number_problem(text, NumberKind::kSigned, /*negative_ok=*/true).empty();
  const std::int64_t v = readable ? std::stoll(text) : 0;
  if (!readable || v < lo || v > hi)
    throw UsageError(name + "='" + text + "' is not a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

double seconds(const std::string& name, const std::string& text) {
  const bool readable = strict_number_problem(text, NumberKind::kReal, /*negative_ok=*/false).empty();
  const double v = readable ? std::stod(text) : -1;
  if (!readable || v > 86400) throw UsageError(name + "='" + text + "' is not a number of seconds in [0, 86400]");
  return v;
}

// The option an argument word names ("--steps" for "--steps" and "--steps=5"), or "".
std::string option_of(const std::string& word) {
  if (word.rfind("--", 0) != 0) return "";
  return word.substr(0, word.find('='));
}

void require_executable(const std::string& path, const std::string& what_to_do) {
  if (access(path.c_str(), X_OK) != 0) throw UsageError(path + " not found: " + what_to_do);
}

}  // namespace

std::optional<std::string> process_environment(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

BatchJobSettings read_batch_job(const Environment& env, const std::string& working_folder) {
  const auto get = [&](const char* name, const std::string& fallback) { return env(name).value_or(fallback); };
  BatchJobSettings job;
  job.job_id = get("SLURM_JOB_ID", "");
  if (job.job_id.empty()) throw UsageError("not inside a Slurm job: submit scripts/slurm/train.sbatch with sbatch (see its --help)");
  job.job_nodes = get("SLURM_JOB_NODELIST", "?");
  job.restart_count = int(whole_number("SLURM_RESTART_COUNT", get("SLURM_RESTART_COUNT", "0"), 0, 1000000));
  job.ntasks = int(whole_number("SLURM_NTASKS", get("SLURM_NTASKS", "1"), 1, 1000000));
  const std::string submit = get("SLURM_SUBMIT_DIR", working_folder);
  job.home = get("SHARDTRAIN_HOME", submit);
  job.bin = get("SHARDTRAIN_BIN", job.home + "/build/bin");
  job.run_dir = get("RUN_DIR", submit + "/run/" + get("SLURM_JOB_NAME", "shardtrain") + "-" + job.job_id);
  job.data = get("DATA", job.home + "/data/fortunes.h5");
  job.trainer = get("TRAINER", "ddp-train");
  if (job.trainer != "ddp-train" && job.trainer != "fsdp-train")
    throw UsageError("TRAINER must be ddp-train or fsdp-train (got '" + job.trainer + "')");
  job.launcher = get("LAUNCHER", "srun");
  if (job.launcher != "srun" && job.launcher != "mpirun")
    throw UsageError("LAUNCHER must be srun or mpirun (got '" + job.launcher + "')");
  job.steps = whole_number("STEPS", get("STEPS", "200"), 1, std::int64_t(1) << 40);
  job.min_ranks = int(whole_number("MIN_RANKS", get("MIN_RANKS", "1"), 1, 1000000));
  if (job.min_ranks > job.ntasks)
    throw UsageError("MIN_RANKS=" + std::to_string(job.min_ranks) + " is above the job's " + std::to_string(job.ntasks) +
                     " tasks (sbatch -n)");
  job.max_restarts = int(whole_number("MAX_RESTARTS", get("MAX_RESTARTS", "5"), 0, 1000000));
  job.save_wait_s = seconds("SAVE_WAIT", get("SAVE_WAIT", "100"));
  const std::string deterministic = get("DETERMINISTIC", "1");
  if (deterministic != "0" && deterministic != "1")
    throw UsageError("DETERMINISTIC must be 1 (bitwise on any world size) or 0 (fast mode), got '" + deterministic + "'");

  std::vector<std::string>& opts = job.trainer_options;
  opts = {"--data", job.data, "--seq-len", get("SEQ_LEN", "256")};
  for (auto& w : words_of(get("MODEL", kDefaultModel))) opts.push_back(w);
  opts.insert(opts.end(), {"--steps", std::to_string(job.steps), "--ckpt-every", get("CKPT_EVERY", "50"), "--keep", "3",
                           "--resume", "auto", "--device", get("DEVICE", "cpu")});
  if (deterministic == "1") opts.push_back("--deterministic");
  std::set<std::string> set_here;
  for (const auto& w : opts)
    if (!option_of(w).empty()) set_here.insert(option_of(w));
  for (const auto& w : words_of(get("TRAIN_ARGS", ""))) {
    const std::string option = option_of(w);
    if (option == "--run-dir") throw UsageError("TRAIN_ARGS sets --run-dir: set RUN_DIR instead");
    if (set_here.count(option))
      throw UsageError("TRAIN_ARGS sets " + option + ", which train.sbatch already sets: use the variable for it (" +
                       kSetByVariables + "; see train.sbatch --help)");
    opts.push_back(w);
  }
  opts.push_back("--run-dir");
  opts.push_back(job.run_dir);
  return job;
}

std::vector<std::string> batch_job_command(const BatchJobSettings& job) {
  std::vector<std::string> argv;
  if (job.launcher == "srun")
    argv = {"srun", "--mpi=pmix", "--kill-on-bad-exit=1", "--ntasks", std::to_string(job.ntasks)};
  else
    argv = {"mpirun", "-np", std::to_string(job.ntasks)};
  argv.push_back(job.bin + "/" + job.trainer);
  argv.insert(argv.end(), job.trainer_options.begin(), job.trainer_options.end());
  return argv;
}

LauncherOptions batch_job_launcher_options(const BatchJobSettings& job) {
  LauncherOptions o;
  o.policy.max_restarts = job.max_restarts;
  o.policy.backoff_s = 10;
  o.policy.min_ranks = job.min_ranks;
  o.log_path = job.run_dir + "/restarts-" + job.job_id + "." + std::to_string(job.restart_count) + ".json";
  o.exclude_cmd = job.home + "/scripts/slurm/exclude-node.sh";
  LauncherOptions::SlurmBatch batch;
  batch.time_limit.job_id = job.job_id;
  batch.time_limit.save_wait_s = job.save_wait_s;
  batch.time_limit.last_step = job.steps;
  batch.ranks_via_srun = job.launcher == "srun";
  o.slurm_batch = batch;
  return o;
}

int run_batch_job(const BatchJobSettings& job) {
  require_executable(job.home + "/scripts/slurm/exclude-node.sh",
                     "submit from the clone's top folder or set SHARDTRAIN_HOME");
  for (const std::string& tool : {job.trainer, std::string("run-resilient")})
    require_executable(job.bin + "/" + tool, "build first (scripts/setup.sh) or set SHARDTRAIN_BIN");
  if (!fs::is_regular_file(job.data))
    throw UsageError("dataset " + job.data + " not found: run scripts/setup.sh (it prepares data/) or set DATA");
  if (job.launcher == "srun") {
    const std::string plugins = slurm::srun_mpi_list();
    if (!slurm::lists_mpi_plugin(plugins, "pmix"))
      throw UsageError("this cluster's srun has no PMIx (srun --mpi=list: " + plugins +
                       "); Open MPI under srun needs --mpi=pmix: ask the admins for Slurm's pmix plugin, or set LAUNCHER=mpirun");
  } else {
    if (find_on_path("mpirun").empty())
      throw UsageError("mpirun not found (LAUNCHER=mpirun): install Open MPI or use LAUNCHER=srun");
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  std::error_code ec;
  fs::create_directories(job.run_dir, ec);
  if (ec) throw IoError("cannot create the run folder " + job.run_dir + " (RUN_DIR): " + ec.message());
  std::cout << "run-resilient: " << now_rfc3339() << " job " << job.job_id << " (restart count " << job.restart_count
            << ") on " << job.job_nodes << ": " << job.ntasks << " ranks via " << job.launcher << ", run folder "
            << job.run_dir << std::endl;
  const int status = run_resilient(batch_job_launcher_options(job), ChildCommand::parse(batch_job_command(job)));
  if (status == 75) {
    std::cout << "run-resilient: the launcher excluded a failing node and requeued the job (status 75)" << std::endl;
    return 0;
  }
  return status;
}

}  // namespace shardtrain::launch
