// Where each rank of a job runs: RUN_DIR/hosts.json, written by rank 0 at every start of the
// trainer (docs/FORMATS.md "Rank hosts"). A rank that dies leaves no flight record, so its host
// is known only from here: the resilient launcher reads it to name the host of a dead rank and to
// tell a lost node (every rank of one host gone, the others alive) from a lost rank.
//
//   {"format": "shardtrain-rank-hosts", "version": 1, "job_id": string|null, "hosts": [host of rank 0, ...]}
#pragma once
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"

namespace shardtrain {

inline constexpr const char* kRankHostsFormat = "shardtrain-rank-hosts";

struct RankHosts {
  std::string job_id;               // "" unknown
  std::vector<std::string> hosts;   // index = world rank
  // host -> its ranks, in rank order.
  std::map<std::string, std::vector<int>> ranks_by_host() const;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{format_tag("format", kRankHostsFormat, "rank hosts file"), constant("version", 1),
                      key("job_id", &RankHosts::job_id, empty_as_null, kMayBeAbsent), key("hosts", &RankHosts::hosts)};
  }
  bool operator==(const RankHosts&) const = default;
};

std::string rank_hosts_path(const std::string& run_dir);  // RUN_DIR/hosts.json
void write_rank_hosts(const std::string& run_dir, const RankHosts& hosts);  // atomic
RankHosts read_rank_hosts(const std::string& run_dir);  // the JsonFile errors, naming the file

}  // namespace shardtrain
