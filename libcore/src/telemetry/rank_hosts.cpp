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

nlohmann::json RankHosts::to_json() const {
  return {{"format", kRankHostsFormat},
          {"version", 1},
          {"job_id", job_id.empty() ? nlohmann::json() : nlohmann::json(job_id)},
          {"hosts", hosts}};
}

RankHosts RankHosts::from_json(const JsonFile& f) {
  if (f.string("/format") != kRankHostsFormat) f.fail("is not a rank hosts file (format " + f.string("/format") + ")");
  RankHosts h;
  h.job_id = json_fields::nullable_string(f, "/job_id").value_or("");
  h.hosts = json_fields::strings(f, "/hosts");
  return h;
}

std::string rank_hosts_path(const std::string& run_dir) { return run_dir + "/hosts.json"; }

void write_rank_hosts(const std::string& run_dir, const RankHosts& hosts) {
  write_json_file(rank_hosts_path(run_dir), hosts.to_json());
}

RankHosts read_rank_hosts(const std::string& run_dir) {
  return RankHosts::from_json(JsonFile::read(rank_hosts_path(run_dir), "the rank hosts file"));
}

}  // namespace shardtrain
