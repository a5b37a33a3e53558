// The transport-independent parts of communicator.hpp: accounting and the --allreduce names.
#include "shardtrain/comm/communicator.hpp"

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/comm/hierarchical.hpp"

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
  j["scratch_bytes"] = scratch_bytes;
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

// Both defaulted here, where CommLevel is complete, not in the header: clang 14 (the sanitizer and
// fuzz builds) crashed defaulting CommLevel's inline, through std::vector<CommLevel> inside the
// CommStats it holds. Defaulted, so every field is compared, a new one too.
bool CommStats::operator==(const CommStats&) const = default;
bool CommLevel::operator==(const CommLevel&) const = default;

CommStats CommStats::from_json(const JsonFile& f, const std::string& at) {
  using json_fields::field;
  CommStats c;
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    const std::string op = field(at, op_name(static_cast<CollectiveOp>(i)));
    if (!f.has(op)) continue;  // never called
    c.per_op[i] = {json_fields::count(f, field(op, "calls")), json_fields::count(f, field(op, "bytes")),
                   f.number(field(op, "busy_s")), f.number(field(op, "cpu_s"))};
  }
  c.group_size = json_fields::small_integer(f, field(at, "group_size"));
  c.wait_s = f.number(field(at, "wait_s"));
  // Absent in summaries written before the field existed: nothing known, 0.
  if (f.has(field(at, "scratch_bytes"))) c.scratch_bytes = json_fields::count(f, field(at, "scratch_bytes"));
  c.all_reduce_algorithm = f.string(field(at, "allreduce_algorithm"));
  if (!f.has(field(at, "levels"))) return c;
  json_fields::require_object(f, field(at, "levels"));
  for (const auto& level : f.at(field(at, "levels")).items()) {
    const std::string l = field(field(at, "levels"), level.key());
    c.levels.push_back({level.key(), json_fields::boolean(f, field(l, "inter_node")), CommStats::from_json(f, l)});
  }
  c.nodes = json_fields::small_integer(f, field(at, "nodes"));
  c.ranks_per_node = json_fields::small_integer(f, field(at, "ranks_per_node"));
  if (!f.has(field(at, "hierarchical_from_bytes"))) return c;
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    const auto op = static_cast<CollectiveOp>(i);
    const std::string from = field(field(at, "hierarchical_from_bytes"), op_name(op));
    if (!f.has(from)) continue;
    c.hierarchical_from_bytes.emplace_back(op, f.at(from).is_null() ? kNeverHierarchical : json_fields::count(f, from));
  }
  return c;
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
