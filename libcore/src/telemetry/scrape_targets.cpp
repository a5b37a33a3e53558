#include "shardtrain/telemetry/scrape_targets.hpp"

#include "shardtrain/base/durable_file.hpp"

namespace shardtrain {

nlohmann::json ScrapeTarget::to_json() const {
  return {{"targets", nlohmann::json::array({address})}, {"labels", labels}};
}

int metrics_port_of(int base_port, const std::vector<std::string>& rank_hosts, int rank) {
  if (rank < 0 || std::size_t(rank) >= rank_hosts.size()) return base_port + rank;  // no host known: one port each
  int local = 0;
  for (int r = 0; r < rank; ++r) local += rank_hosts[std::size_t(r)] == rank_hosts[std::size_t(rank)];
  return base_port + local;
}

std::string scrape_host_of(const std::string& bind, const std::string& rank_host) {
  return bind.empty() || bind == "0.0.0.0" || bind == "::" ? rank_host : bind;
}

std::string scrape_targets_path(const std::string& run_dir) { return run_dir + "/prometheus-targets.json"; }
std::string launcher_scrape_targets_path(const std::string& run_dir) {
  return run_dir + "/prometheus-launcher-targets.json";
}

void write_scrape_targets_file(const std::string& path, const std::vector<ScrapeTarget>& targets) {
  nlohmann::json all = nlohmann::json::array();
  for (const ScrapeTarget& t : targets) all.push_back(t.to_json());
  write_file_atomically(path, all.dump(2) + "\n");
}

void write_scrape_targets(const std::string& run_dir, const std::vector<ScrapeTarget>& targets) {
  write_scrape_targets_file(scrape_targets_path(run_dir), targets);
}

}  // namespace shardtrain
