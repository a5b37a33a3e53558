#include "hang_mismatch.hpp"

#include <algorithm>
#include <map>

namespace shardtrain::hang {
namespace {

using nlohmann::json;

json field_value(const DumpEntry& e, const std::string& field) {
  if (field == "op") return e.op;
  if (field == "numel") return e.numel;
  if (field == "dtype") return e.dtype;
  // The whole two-level call's count: its stages can agree on their own counts (a pipelined
  // chunk, a node group that holds no odd rank) while one rank's call is short; absent (null) on
  // an entry that is no stage.
  if (field == "part_of.numel") return e.part_of ? json(e.part_of->numel) : json();
  return e.root;
}

const char* const kComparedFields[] = {"op", "numel", "dtype", "root", "part_of.numel"};

std::vector<std::string> group_names(const DumpSet& set) {
  std::vector<std::string> names;
  for (const auto& d : set.dumps)
    for (const auto& g : d.groups)
      if (std::find(names.begin(), names.end(), g.name) == names.end()) names.push_back(g.name);
  return names;
}

}  // namespace

std::vector<Mismatch> find_mismatches(const DumpSet& set) {
  std::vector<Mismatch> out;
  for (const auto& name : group_names(set)) {
    std::map<std::uint64_t, std::vector<std::pair<int, const DumpEntry*>>> by_seq;
    for (const auto& d : set.dumps)
      if (const DumpGroup* g = d.group(name))
        for (const auto& e : g->entries) by_seq[e.seq].emplace_back(d.rank, &e);
    for (const auto& [seq, recorded] : by_seq) {
      if (recorded.size() < 2) continue;
      for (const char* field : kComparedFields) {
        Mismatch m;
        m.group = name;
        m.seq = seq;
        m.field = field;
        for (const auto& [rank, e] : recorded) m.values[rank] = field_value(*e, field);
        const bool all_equal = std::all_of(m.values.begin(), m.values.end(),
                                           [&](const auto& kv) { return kv.second == m.values.begin()->second; });
        if (all_equal) continue;
        const DumpEntry& first = *std::min_element(recorded.begin(), recorded.end())->second;
        m.op = first.op;
        m.phase = first.phase;
        m.step = first.step;
        out.push_back(std::move(m));
      }
    }
  }
  return out;
}

std::optional<json> value_from_history(const DumpSet& set, const Mismatch& m) {
  const RankDump* ref_dump = set.dump_of(m.values.begin()->first);
  const DumpGroup* ref_group = ref_dump ? ref_dump->group(m.group) : nullptr;
  const DumpEntry* ref = ref_group ? ref_group->find(m.seq) : nullptr;
  if (!ref || ref->step <= 0) return std::nullopt;  // no step before it
  std::size_t k = 0;
  for (const auto& e : ref_group->entries) k += e.step == ref->step && e.seq < ref->seq;
  std::optional<json> value;
  for (const auto& d : set.dumps) {
    const DumpGroup* g = d.group(m.group);
    if (!g || g->entries.empty()) continue;
    // After a wrap-around the oldest step in the ring may have lost its first entries: positions
    // within it are not to be trusted.
    const std::int64_t partial_step = g->dropped > 0 ? g->entries.front().step : -2;
    std::map<std::int64_t, std::vector<const DumpEntry*>> by_step;  // entries in seq order
    for (const auto& e : g->entries)
      if (e.step >= 0 && e.step < ref->step && e.step != partial_step) by_step[e.step].push_back(&e);
    for (const auto& [step, entries] : by_step) {
      if (entries.size() <= k) continue;
      const DumpEntry& e = *entries[k];
      if (e.phase != ref->phase || (m.field != "op" && e.op != ref->op)) continue;
      const json v = field_value(e, m.field);
      if (value && *value != v) return std::nullopt;
      value = v;
    }
  }
  return value;
}

}  // namespace shardtrain::hang
