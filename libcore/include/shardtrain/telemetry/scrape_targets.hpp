// Where a job's metrics endpoints are: RUN_DIR/prometheus-targets.json, a Prometheus file-based
// service-discovery file (file_sd_configs; docs/FORMATS.md "Scrape targets", docs/RUNBOOK.md
// "Watching a job in Prometheus"), written by rank 0 at every start of the trainer with
// --metrics-port, so a restart or a new world size rewrites it and a Prometheus watching the
// file follows the job to whatever nodes it runs on:
//
//   [{"targets": ["ADDR:PORT"], "labels": {"train_job": ..., "run_dir": ..., "rank": "0", "host": ...,
//     "data_snapshot": ..., "code_version": ...}}, ... one object per rank, by world rank]
//
// The resilient launcher (run-resilient --metrics-port) writes its one target, with the same file
// format, to RUN_DIR/prometheus-launcher-targets.json: a file of its own, since the trainer's
// rank 0 rewrites the first at each start.
//
// Port rule: rank r serves on PORT + (its local rank: how many ranks before r run on r's host),
// so ranks sharing a host never share a port and the ports of a host are PORT .. PORT + L - 1.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardtrain {

// One rank's endpoint and the labels its series carry (the same labels the rank puts on every
// series it serves, so a scrape with honor_labels keeps them and one without sees them twice).
struct ScrapeTarget {
  std::string address;                        // "host:port" Prometheus connects to
  std::map<std::string, std::string> labels;  // Prometheus label names -> values
  nlohmann::json to_json() const;             // {"targets": [address], "labels": {...}}
  bool operator==(const ScrapeTarget&) const = default;
};

// The port of world rank `rank` under the port rule above; `rank_hosts` by world rank.
int metrics_port_of(int base_port, const std::vector<std::string>& rank_hosts, int rank);

// The address Prometheus reaches a rank at: the bind address, or the rank's host name when it
// binds every interface ("0.0.0.0", "::" or "").
std::string scrape_host_of(const std::string& bind, const std::string& rank_host);

std::string scrape_targets_path(const std::string& run_dir);           // RUN_DIR/prometheus-targets.json
std::string launcher_scrape_targets_path(const std::string& run_dir);  // RUN_DIR/prometheus-launcher-targets.json
// Write the file atomically (a Prometheus reading it mid-write sees the old or the new list):
// at `path`, or the trainer's at scrape_targets_path(run_dir).
void write_scrape_targets_file(const std::string& path, const std::vector<ScrapeTarget>& targets);
void write_scrape_targets(const std::string& run_dir, const std::vector<ScrapeTarget>& targets);

}  // namespace shardtrain
