// The transport-independent parts of communicator.hpp: accounting and the --allreduce names.
#include "shardtrain/comm/communicator.hpp"

#include "shardtrain/base/json_record.hpp"
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

namespace {

// The JSON of CommStats (the run summary's "communication"; its keys once, base/json_record.hpp).
// The operations are keyed by op_name and left out when never called; each holds its counts and,
// written only, its bandwidths.
auto op_fields() {
  using namespace json_fields;
  return std::tuple{key("calls", &OpStats::calls), key("bytes", &OpStats::bytes), key("busy_s", &OpStats::busy_s),
                    key("cpu_s", &OpStats::cpu_s)};
}

// hierarchical_from_bytes: {OP: bytes, or null for kNeverHierarchical}, read in operation order.
struct FromBytes {
  using List = std::vector<std::pair<CollectiveOp, std::uint64_t>>;
  List read(const JsonFile& f, const std::string& pointer) const {
    json_fields::require_object(f, pointer);
    List out;
    for (int i = 0; i < kNumCollectiveOps; ++i) {
      const auto op = static_cast<CollectiveOp>(i);
      const std::string at = json_fields::field(pointer, op_name(op));
      if (f.has(at)) out.emplace_back(op, json_fields::null_or(f, at, json_fields::count).value_or(kNeverHierarchical));
    }
    return out;
  }
  nlohmann::json write(const List& list) const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [op, bytes] : list) out[op_name(op)] = bytes == kNeverHierarchical ? nlohmann::json(nullptr) : nlohmann::json(bytes);
    return out;
  }
};

// A level: its name is its key in "levels"; the object holds "inter_node" and the level's CommStats.
auto level_fields() {
  using namespace json_fields;
  return std::tuple{key("inter_node", &CommLevel::inter_node), inlined(&CommLevel::stats)};
}

// The group's own fields, then, with levels only, the hierarchy's (read when "levels" is there;
// "scratch_bytes" and "hierarchical_from_bytes" are absent in summaries written before them).
auto comm_fields() {
  using namespace json_fields;
  return std::tuple{
      key("group_size", &CommStats::group_size), written("total_bytes", &CommStats::total_bytes),
      written("total_busy_s", &CommStats::total_busy_s), written("total_cpu_s", &CommStats::total_cpu_s),
      key("wait_s", &CommStats::wait_s), key("scratch_bytes", &CommStats::scratch_bytes, kMayBeAbsent),
      key("allreduce_algorithm", &CommStats::all_reduce_algorithm),
      when([](const CommStats& c) { return !c.levels.empty(); }, key("levels", &CommStats::levels, keyed_by(&CommLevel::name, level_fields())),
           written_by("intra_node_busy_s", [](const CommStats& c) { return c.level_busy_s(false); }),
           written_by("inter_node_busy_s", [](const CommStats& c) { return c.level_busy_s(true); }),
           key("nodes", &CommStats::nodes), key("ranks_per_node", &CommStats::ranks_per_node),
           key("hierarchical_from_bytes", &CommStats::hierarchical_from_bytes, FromBytes{}, kOmittedWhenEmpty))};
}

}  // namespace

nlohmann::json CommStats::to_json() const {
  nlohmann::json j = json_fields::write_fields(*this, comm_fields());
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    const auto& s = per_op[i];
    if (s.calls == 0) continue;
    const auto op = static_cast<CollectiveOp>(i);
    nlohmann::json o = json_fields::write_fields(s, op_fields());
    o["algbw_GBps"] = (s.busy_s > 0 ? double(s.bytes) / s.busy_s : 0.0) * 1e-9;
    o["busbw_GBps"] = bus_bandwidth(op, s.bytes, s.busy_s, group_size) * 1e-9;
    j[op_name(op)] = std::move(o);
  }
  return j;
}

// Both defaulted here, where CommLevel is complete, not in the header: clang 14 (the sanitizer and
// fuzz builds) crashed defaulting CommLevel's inline, through std::vector<CommLevel> inside the
// CommStats it holds. Defaulted, so every field is compared, a new one too.
bool CommStats::operator==(const CommStats&) const = default;
bool CommLevel::operator==(const CommLevel&) const = default;

CommStats CommStats::from_json(const JsonFile& f, const std::string& at) {
  CommStats c;
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    const std::string op = json_fields::field(at, op_name(static_cast<CollectiveOp>(i)));
    if (f.has(op)) json_fields::read_fields(f, op, c.per_op[i], op_fields());  // absent: never called
  }
  json_fields::read_fields(f, at, c, comm_fields());
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
