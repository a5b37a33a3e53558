// run-resilient: run a training command and restart it from its newest valid checkpoint when it
// fails: a verdict per failed attempt, backoff, elastic world size, exclusion of a failing host,
// SIGUSR1 before a time limit, the restart log; or, with --slurm-batch, the whole training batch
// job of scripts/slurm/train.sbatch from its environment. Options + one call into libcore
// (launch/launcher.hpp, launch/batch_job.hpp). See run-resilient(1).
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "shardtrain/launch/batch_job.hpp"
#include "shardtrain/launch/child_command.hpp"
#include "shardtrain/launch/launcher.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/tool/tool.hpp"

int main(int argc, char** argv) {
  namespace launch = shardtrain::launch;
  CLI::App app{"Run a training command (mpirun ... ddp-train ... or srun ...) and restart it from the newest valid\n"
               "checkpoint (--resume auto) when it fails. Each failed attempt gets a verdict from its flight records\n"
               "(class, culprit rank and host, where), printed and logged in the restart log; a command still running\n"
               "a second after its ranks recorded a collective timeout is ended (SIGTERM, then SIGKILL) and judged at\n"
               "once. Exit 0 when the command finally succeeds, 75 after --exclude-cmd excluded a host, else the last\n"
               "attempt's status (2: a usage or input error, never retried).",
               "run-resilient"};
  launch::LauncherOptions options;
  std::vector<std::string> command;
  int min_ranks = 0;
  app.add_option("--max-restarts", options.policy.max_restarts, "Restarts at most")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--backoff", options.policy.backoff_s,
                 "Seconds before a restart, doubling (up to 60) with each failure in a row that committed no new "
                 "checkpoint")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log", options.log_path, "The restart log (default RUN_DIR/restarts.json)");
  app.add_option("--min-ranks", min_ranks,
                 "Elastic restarts: the smallest world size to restart on (the command's rank count is rewritten; "
                 "the global batch must divide by the new one)")
      ->check(CLI::PositiveNumber);
  app.add_option("--capacity-cmd", options.capacity_cmd,
                 "With --min-ranks: a shell command printing how many ranks can run now, asked before each restart");
  app.add_option("--rank-failures", options.policy.rank_failures,
                 "Verdicts naming the same culprit in a row before it is excluded (its host with --exclude-cmd, else "
                 "its slot with --min-ranks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--exclude-cmd", options.exclude_cmd,
                 "A shell command run as `CMD HOST RANK` to exclude a failing host (under Slurm: "
                 "scripts/slurm/exclude-node.sh); the launcher then exits 75");
  app.add_option("--metrics-port", options.metrics_port,
                 "Serve the launcher's own Prometheus series (restarts, world size, the last verdict's class, culprit "
                 "rank and host) at http://ADDR:PORT/metrics, named in RUN_DIR/prometheus-launcher-targets.json; 0: off. "
                 "Not one of the trainer's --metrics-port ports")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--metrics-bind", options.metrics_bind, "The address of --metrics-port (0.0.0.0: every interface)")
      ->capture_default_str();
  std::string diagnose_bin;
  app.add_option("--diagnose-bin", diagnose_bin,
                 "Accepted for old job scripts and ignored: the verdict is made in this program, with no hang-diagnose");
  bool slurm_batch = false;
  app.add_flag("--slurm-batch", slurm_batch,
               "Run the training batch job of scripts/slurm/train.sbatch (which runs it) from the environment sbatch "
               "gives it (train.sbatch --help lists the variables): the command, restarts on the allocation's live "
               "ranks, exclusion of a failing node, and the time-limit stop (SIGUSR1: every rank checkpoints, the job "
               "is requeued unless done). Takes no other option and no COMMAND");
  app.add_option("COMMAND", command, "The training command, after --; it must contain --run-dir DIR");
  shardtrain::add_version_flag(app);

  return shardtrain::run_tool(app, argc, argv, {}, [&] {
    if (slurm_batch) {
      if (argc != 2) throw shardtrain::UsageError("--slurm-batch takes no other option and no command: the job's environment says it all");
      return launch::run_batch_job(launch::read_batch_job(launch::process_environment, std::filesystem::current_path().string()));
    }
    if (command.empty()) throw shardtrain::UsageError("COMMAND is required: run-resilient [OPTIONS] -- COMMAND (see --help)");
    if (min_ranks > 0) options.policy.min_ranks = min_ranks;
    return launch::run_resilient(options, launch::ChildCommand::parse(command));
  });
}
