#include "live_metrics_server.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/telemetry/scrape_targets.hpp"

namespace shardtrain {
namespace {

// The labels of every series of `rank` (and of its scrape target).
std::map<std::string, std::string> labels_of(const Job& job, int rank) {
  const char* slurm = std::getenv("SLURM_JOB_ID");
  return {{"train_job", slurm && *slurm ? std::string(slurm) : flight_job_id()},
          {"run_dir", std::filesystem::weakly_canonical(job.options.run_dir).string()},
          {"rank", std::to_string(rank)},
          {"host", job.rank_hosts.at(std::size_t(rank))},
          {"data_snapshot", job.identity.data_snapshot_id},
          {"code_version", job.identity.code_version}};
}

}  // namespace

std::optional<LiveMetricsServer> serve_live_metrics(Job& job) {
  const TelemetryOptions& t = job.options.telemetry;
  if (t.metrics_port == 0) return std::nullopt;
  LiveMetricsConfig config;
  config.labels = labels_of(job, job.rank);
  config.world_rank = job.rank;
  config.steps_planned = job.options.schedule.steps;
  config.collective_timeout_s = t.collective_timeout_s;
  config.checkpoint_every = job.options.checkpoint.every;
  config.memory_budget_bytes = job.options.parallelism.memory_budget;
  config.straggler_threshold = t.straggler_threshold;
  LiveMetricsServer server{std::make_shared<LiveMetrics>(std::move(config)), nullptr};
  std::exception_ptr failure;
  try {
    server.endpoint = std::make_unique<MetricsEndpoint>(t.metrics_bind, metrics_port_of(t.metrics_port, job.rank_hosts, job.rank),
                                                        server.metrics);
  } catch (const UsageError&) {
    failure = std::current_exception();
  }
  rethrow_together(job, failure,
                   "--metrics-port: another rank could not serve its metrics (its message names the address); "
                   "choose a free --metrics-port");
  if (job.rank == 0) {
    std::vector<ScrapeTarget> targets;
    for (int r = 0; r < job.world; ++r) {
      const std::string host = scrape_host_of(t.metrics_bind, job.rank_hosts.at(std::size_t(r)));
      targets.push_back({host + ":" + std::to_string(metrics_port_of(t.metrics_port, job.rank_hosts, r)), labels_of(job, r)});
    }
    write_scrape_targets(job.options.run_dir, targets);
    log_line_rank0("metrics: every rank serves /metrics from " + server.endpoint->address() +
                   " up (port + local rank); scrape targets in " + scrape_targets_path(job.options.run_dir));
  }
  return server;
}

}  // namespace shardtrain
