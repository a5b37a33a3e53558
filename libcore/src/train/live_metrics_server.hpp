// Serving the trainer's live metrics (train/live_metrics.hpp) from every rank of a job: the
// endpoint of each rank (PORT + its local rank, telemetry/scrape_targets.hpp) and the job's
// service-discovery file.
#pragma once
#include <memory>
#include <optional>

#include "job.hpp"
#include "shardtrain/telemetry/metrics_endpoint.hpp"
#include "shardtrain/train/live_metrics.hpp"

namespace shardtrain {

// This rank's endpoint and its metrics, alive as long as the job's step loop.
struct LiveMetricsServer {
  std::shared_ptr<LiveMetrics> metrics;
  std::unique_ptr<MetricsEndpoint> endpoint;
};

// Collective over job.comm: with --metrics-port, every rank binds its port (PORT + local rank) and
// the ranks agree that all bound; rank 0 then writes RUN_DIR/prometheus-targets.json. Any rank
// that cannot bind fails the job at start on every rank (UsageError, exit 2; the one that failed
// names its address). Nothing (no collective) without --metrics-port.
std::optional<LiveMetricsServer> serve_live_metrics(Job& job);

}  // namespace shardtrain
