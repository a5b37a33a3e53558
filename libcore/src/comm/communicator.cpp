// The transport-independent parts of communicator.hpp: accounting and the --allreduce names.
#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

std::uint64_t CommStats::total_bytes() const {
  std::uint64_t b = 0;
  for (const auto& s : per_op) b += s.bytes;
  for (const auto& l : levels) b += l.stats.total_bytes();
  return b;
}

double CommStats::total_busy_s() const {
  double t = 0;
  for (const auto& s : per_op) t += s.busy_s;
  for (const auto& l : levels) t += l.stats.total_busy_s();
  return t;
}

double CommStats::total_cpu_s() const {
  double t = 0;
  for (const auto& s : per_op) t += s.cpu_s;
  for (const auto& l : levels) t += l.stats.total_cpu_s();
  return t;
}

std::map<int, PeerStats> CommStats::peer_totals() const {
  std::map<int, PeerStats> all = peers;
  for (const auto& l : levels)
    for (const auto& [peer, p] : l.stats.peer_totals()) {
      all[peer].bytes += p.bytes;
      all[peer].seconds += p.seconds;
    }
  return all;
}

double CommStats::level_busy_s(bool inter_node) const {
  double t = 0;
  for (const auto& l : levels)
    if (l.inter_node == inter_node) t += l.stats.total_busy_s();
  return t;
}

nlohmann::json CommStats::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    const auto& s = per_op[i];
    if (s.calls == 0) continue;
    const auto op = static_cast<CollectiveOp>(i);
    const double algbw = s.busy_s > 0 ? double(s.bytes) / s.busy_s : 0.0;
    j[op_name(op)] = {{"calls", s.calls},
                      {"bytes", s.bytes},
                      {"busy_s", s.busy_s},
                      {"cpu_s", s.cpu_s},
                      {"algbw_GBps", algbw * 1e-9},
                      {"busbw_GBps", bus_bandwidth(op, s.bytes, s.busy_s, group_size) * 1e-9}};
  }
  j["group_size"] = group_size;
  j["total_bytes"] = total_bytes();
  j["total_busy_s"] = total_busy_s();
  j["total_cpu_s"] = total_cpu_s();
  j["wait_s"] = wait_s;
  j["allreduce_algorithm"] = all_reduce_algorithm;
  if (levels.empty()) return j;
  nlohmann::json by_name = nlohmann::json::object();
  for (const auto& l : levels) {
    by_name[l.name] = l.stats.to_json();
    by_name[l.name]["inter_node"] = l.inter_node;
  }
  j["levels"] = std::move(by_name);
  j["intra_node_busy_s"] = level_busy_s(false);
  j["inter_node_busy_s"] = level_busy_s(true);
  j["nodes"] = nodes;
  j["ranks_per_node"] = ranks_per_node;
  if (!hierarchical_from_bytes.empty()) {
    nlohmann::json from = nlohmann::json::object();
    for (const auto& [op, bytes] : hierarchical_from_bytes)
      from[op_name(op)] = bytes == ~std::uint64_t(0) ? nlohmann::json(nullptr) : nlohmann::json(bytes);
    j["hierarchical_from_bytes"] = std::move(from);
  }
  return j;
}

AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& text) {
  std::string names;
  for (const auto& [name, algorithm] : kAllReduceAlgorithmNames) {
    if (text == name) return algorithm;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  throw UsageError("--allreduce '" + text + "' is not one of " + names);
}

}  // namespace shardtrain
