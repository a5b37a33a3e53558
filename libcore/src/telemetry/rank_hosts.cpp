// RUN_DIR/hosts.json: one writer (the trainer's rank 0) and one reader (rank_hosts.hpp).
#include "shardtrain/telemetry/rank_hosts.hpp"

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/json_fields.hpp"

namespace shardtrain {

std::map<std::string, std::vector<int>> RankHosts::ranks_by_host() const {
  std::map<std::string, std::vector<int>> out;
  for (std::size_t r = 0; r < hosts.size(); ++r) out[hosts[r]].push_back(int(r));
  return out;
}

std::string rank_hosts_path(const std::string& run_dir) { return run_dir + "/hosts.json"; }

void write_rank_hosts(const std::string& run_dir, const RankHosts& hosts) {
  write_json_file(rank_hosts_path(run_dir), json_fields::write(hosts));
}

RankHosts read_rank_hosts(const std::string& run_dir) {
  return json_fields::read<RankHosts>(JsonFile::read(rank_hosts_path(run_dir), "the rank hosts file"), "");
}

}  // namespace shardtrain
