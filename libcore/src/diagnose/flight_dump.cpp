#include "shardtrain/diagnose/flight_dump.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_number.hpp"

namespace shardtrain::hang {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFormatVersion = 3;

// Field access that names the file and the key when the dump is not what FORMATS.md says.
class Reader {
 public:
  Reader(const std::string& file, std::string where) : file_(file), where_(std::move(where)) {}

  // "FILE: WHERE" (or "FILE"), the start of every message about this part of the dump.
  std::string named() const { return file_ + (where_.empty() ? "" : ": " + where_); }
  [[noreturn]] void fail(const std::string& what) const { throw UsageError(named() + ": " + what); }
  const json& at(const json& j, const char* key) const {
    if (!j.is_object() || !j.contains(key)) fail(std::string("missing key \"") + key + "\"");
    return j.at(key);
  }
  std::string string(const json& j, const char* key) const {
    const json& v = at(j, key);
    if (!v.is_string()) fail(std::string("\"") + key + "\" is not a string");
    return v.get<std::string>();
  }
  std::string string_or(const json& j, const char* key, const std::string& fallback) const {
    return j.contains(key) && !j.at(key).is_null() ? string(j, key) : fallback;
  }
  std::int64_t integer(const json& j, const char* key) const {
    const json& v = at(j, key);
    if (!v.is_number_integer()) fail(std::string("\"") + key + "\" is not an integer");
    return v.get<std::int64_t>();
  }
  std::int64_t integer_or(const json& j, const char* key, std::int64_t fallback) const {
    return j.contains(key) && !j.at(key).is_null() ? integer(j, key) : fallback;
  }
  std::uint64_t count(const json& j, const char* key) const {
    const std::int64_t v = integer(j, key);
    if (v < 0) fail(std::string("\"") + key + "\" is negative");
    return std::uint64_t(v);
  }
  double number(const json& j, const char* key) const {
    return json_number(j, key, named());  // base's one rule: a finite number
  }
  std::optional<double> time(const json& j, const char* key) const {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    return number(j, key);
  }
  const json& array(const json& j, const char* key) const {
    const json& v = at(j, key);
    if (!v.is_array()) fail(std::string("\"") + key + "\" is not an array");
    return v;
  }

 private:
  const std::string& file_;
  std::string where_;
};

DumpEntry parse_entry(const json& j, const Reader& r) {
  DumpEntry e;
  e.id = r.count(j, "id");
  e.seq = r.count(j, "seq");
  e.op = r.string(j, "op");
  e.state = r.string(j, "state");
  e.dtype = r.string_or(j, "dtype", "");
  e.phase = r.string_or(j, "phase", "");
  e.numel = std::uint64_t(std::max<std::int64_t>(0, r.integer_or(j, "numel", 0)));
  e.bytes = std::uint64_t(std::max<std::int64_t>(0, r.integer_or(j, "bytes", 0)));
  e.root = int(r.integer_or(j, "root", -1));
  e.step = r.integer_or(j, "step", -1);
  e.t_enqueue = r.time(j, "t_enqueue");
  e.t_start = r.time(j, "t_start");
  e.t_end = r.time(j, "t_end");
  if (j.contains("part_of") && !j.at("part_of").is_null()) {  // absent before two-level collectives recorded it
    const json& p = j.at("part_of");
    e.part_of = DumpPart{r.string(p, "group"), r.count(p, "collective"), r.string(p, "op"), r.count(p, "numel")};
  }
  return e;
}

DumpGroup parse_group(const json& j, const std::string& file, std::size_t index) {
  const Reader r(file, "groups[" + std::to_string(index) + "]");
  DumpGroup g;
  g.name = r.string(j, "name");
  for (const json& w : r.array(j, "world_ranks")) {
    if (!w.is_number_integer()) r.fail("\"world_ranks\" holds a non-integer");
    g.world_ranks.push_back(w.get<int>());
  }
  g.last_enqueued = r.count(j, "last_enqueued_seq");
  g.last_started = r.count(j, "last_started_seq");
  g.last_completed = r.count(j, "last_completed_seq");
  g.dropped = std::uint64_t(std::max<std::int64_t>(0, r.integer_or(j, "dropped", 0)));
  const json& entries = r.array(j, "entries");
  g.entries.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Reader er(file, "group " + g.name + " entries[" + std::to_string(i) + "]");
    g.entries.push_back(parse_entry(entries[i], er));
  }
  // find() bisects by seq; the writer emits the ring oldest first, but do not rely on it.
  std::stable_sort(g.entries.begin(), g.entries.end(),
                   [](const DumpEntry& a, const DumpEntry& b) { return a.seq < b.seq; });
  return g;
}

std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError(file + ": cannot be opened");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

const DumpEntry* DumpGroup::find(std::uint64_t seq) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), seq,
                             [](const DumpEntry& e, std::uint64_t s) { return e.seq < s; });
  return it != entries.end() && it->seq == seq ? &*it : nullptr;
}

const DumpGroup* RankDump::group(const std::string& name) const {
  for (const auto& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

std::string RankDump::error_message() const {
  if (trigger.is_object() && trigger.contains("error") && trigger["error"].is_string())
    return trigger["error"].get<std::string>();
  return "";
}

const RankDump* DumpSet::dump_of(int rank) const {
  for (const auto& d : dumps)
    if (d.rank == rank) return &d;
  return nullptr;
}

std::vector<int> DumpSet::missing_ranks() const {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r)
    if (!dump_of(r)) missing.push_back(r);
  return missing;
}

RankDump parse_flight_dump(const json& j, const std::string& file) {
  const Reader r(file, "");
  if (!j.is_object()) r.fail("not a JSON object");
  const std::string format = r.string(j, "format");
  if (format != "shardtrain-flight-record")
    r.fail("format is \"" + format + "\", not \"shardtrain-flight-record\"");
  const std::int64_t version = r.integer(j, "format_version");
  if (version != kFormatVersion)
    r.fail("format_version " + std::to_string(version) + " (this reader reads version " +
           std::to_string(kFormatVersion) + " only)");
  RankDump d;
  d.file = file;
  d.job_id = r.string_or(j, "job_id", "");
  d.hostname = r.string_or(j, "hostname", "");
  d.rank = int(r.integer(j, "rank"));
  d.world_size = int(r.integer(j, "world_size"));
  if (d.world_size < 1) r.fail("world_size " + std::to_string(d.world_size) + " is not positive");
  d.reason = r.string(j, "reason");
  d.dumped_at = r.number(j, "dumped_at");
  d.timed_out_group = r.string_or(j, "timed_out_group", "");
  d.trigger = j.contains("trigger") ? j["trigger"] : json();
  if (j.contains("triggers") && j["triggers"].is_array()) {
    for (std::size_t i = 0; i < j["triggers"].size(); ++i) {
      const json& t = j["triggers"][i];
      const Reader tr(file, "triggers[" + std::to_string(i) + "]");
      if (!t.is_object()) tr.fail("not an object");
      DumpTrigger trig;
      trig.reason = tr.string_or(t, "reason", "");
      trig.at = tr.time(t, "at");
      d.triggers.push_back(trig);
    }
  }
  if (j.contains("now") && j["now"].is_object()) {
    const Reader nr(file, "now");
    d.now.known = true;
    d.now.phase = nr.string_or(j["now"], "phase", "");
    d.now.step = nr.integer_or(j["now"], "step", -1);
    d.now.since = nr.number(j["now"], "since");
  }
  const json& groups = r.array(j, "groups");
  for (std::size_t i = 0; i < groups.size(); ++i) d.groups.push_back(parse_group(groups[i], file, i));
  return d;
}

RankDump read_flight_dump(const std::string& file) {
  const std::string text = read_text(file);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // An empty or cut-off file (a writer killed mid-write without the atomic rename, a copy that
    // stopped short) ends early; say so, it is the common case.
    const bool truncated = e.byte >= text.size();
    throw UsageError(file + ": " + (truncated ? "truncated JSON (ends early)" : "malformed JSON") + ": " +
                     e.what());
  } catch (const json::exception& e) {  // out_of_range 406: a number past double's range (1e400)
    throw UsageError(file + ": malformed JSON: " + e.what());
  }
  return parse_flight_dump(j, file);
}

std::vector<std::string> find_flight_dumps(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw UsageError("no run directory or dump file given");
  static const std::regex dump_name(R"(flight\.rank[0-9]+\.json)");
  std::vector<std::string> files;
  for (const auto& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(input))
        if (std::regex_match(entry.path().filename().string(), dump_name)) found.push_back(entry.path().string());
      if (found.empty()) throw UsageError(input + ": no flight.rank*.json dumps in this directory");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(input, ec)) {
      files.push_back(input);
    } else {
      throw UsageError(input + ": no such file or directory");
    }
  }
  return files;
}

DumpSet check_dump_set(std::vector<RankDump> dumps, int world_size_override) {
  if (dumps.empty()) throw UsageError("no flight record dumps to read");
  DumpSet set;
  const RankDump& first = dumps.front();
  std::map<int, std::string> file_of_rank;
  for (const auto& d : dumps) {
    if (d.world_size != first.world_size)
      throw UsageError(d.file + ": world_size " + std::to_string(d.world_size) + ", but " + first.file + " has " +
                       std::to_string(first.world_size) + " (dumps of different jobs)");
    if (!d.job_id.empty()) {
      if (set.job_id.empty()) set.job_id = d.job_id;
      else if (d.job_id != set.job_id)
        throw UsageError(d.file + ": job_id \"" + d.job_id + "\", but another dump has \"" + set.job_id +
                         "\" (dumps of different jobs)");
    }
    auto [it, fresh] = file_of_rank.emplace(d.rank, d.file);
    if (!fresh) throw UsageError(d.file + ": a second dump of rank " + std::to_string(d.rank) + " (first: " + it->second + ")");
  }
  set.world_size = world_size_override > 0 ? world_size_override : first.world_size;
  for (const auto& d : dumps)
    if (d.rank < 0 || d.rank >= set.world_size)
      throw UsageError(d.file + ": rank " + std::to_string(d.rank) + " is outside the world of " +
                       std::to_string(set.world_size) + " ranks");
  std::sort(dumps.begin(), dumps.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  set.dumps = std::move(dumps);
  return set;
}

DumpSet load_flight_dumps(const std::vector<std::string>& inputs, int world_size_override) {
  std::vector<RankDump> dumps;
  for (const auto& file : find_flight_dumps(inputs)) dumps.push_back(read_flight_dump(file));
  return check_dump_set(std::move(dumps), world_size_override);
}

}  // namespace shardtrain::hang
