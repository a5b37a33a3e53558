// Reading flight records (docs/FORMATS.md "Flight record", format_version 3) for hang-diagnose:
// one dump per rank, checked to belong to one job. The reader side of comm/flight_recorder.hpp,
// kept apart from it on purpose: it holds the dump as the file states it (names and strings, no
// comm enums), so a dump from a newer writer with an op or phase this build does not know is
// still read and reported, not refused.
//
// Contract:
//   - parse_flight_dump/read_flight_dump accept exactly format "shardtrain-flight-record",
//     format_version 3, with the required keys present and of the right type; anything else
//     throws UsageError "FILE: what is wrong" (exit 2 through run_tool).
//   - load_flight_dumps takes run directories (every flight.rank*.json inside) and/or dump files,
//     and refuses (UsageError naming the file): no dump at all, a missing path, malformed or
//     truncated JSON, two dumps of one rank, dumps of different jobs (different non-empty job_id,
//     different world_size), a rank outside [0, world size).
//   - Times are unix seconds as written; a null time is absent (std::nullopt).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardtrain::hang {

// The two-level collective an entry is a stage of (FORMATS.md "entries[].part_of",
// comm/flight_recorder.hpp CollectivePart): the caller's group, the collective's number among that
// group's two-level collectives, and the call (op, numel) as the caller made it.
struct DumpPart {
  std::string group;
  std::uint64_t collective = 0;
  std::string op;
  std::uint64_t numel = 0;
  bool operator==(const DumpPart&) const = default;
};

// One recorded operation of one group (FORMATS.md "entries[]").
struct DumpEntry {
  std::uint64_t id = 0, seq = 0;
  std::string op, dtype, phase, state;  // as written: "AllReduce", "float32", "forward", "started"...
  std::uint64_t numel = 0, bytes = 0;
  int root = -1;
  std::int64_t step = -1;
  std::optional<double> t_enqueue, t_start, t_end;
  std::optional<DumpPart> part_of;  // absent: a collective of its own (and in records older than the key)
  // Issue time, else submission time: when the rank began to wait on it.
  std::optional<double> t_begin() const { return t_start ? t_start : t_enqueue; }
};

// One communicator group of one rank (FORMATS.md "groups[]"). Groups split with one name by
// different ranks (the node groups of a two-level collective, one per node) are different groups
// of that name: a group is its name and its world_ranks together.
struct DumpGroup {
  std::string name;
  std::vector<int> world_ranks;
  std::uint64_t last_enqueued = 0, last_started = 0, last_completed = 0;
  std::uint64_t dropped = 0;       // entries lost to the ring's wrap-around
  std::vector<DumpEntry> entries;  // oldest first (increasing seq)
  // The entry of `seq` when the ring still holds it, else nullptr.
  const DumpEntry* find(std::uint64_t seq) const;
};

// Where the rank was outside any collective (FORMATS.md top-level "now").
struct DumpNow {
  bool known = false;  // false: the dump had no "now"
  std::string phase;
  std::int64_t step = -1;
  double since = 0;
};

// One dump the process wrote (FORMATS.md top-level "triggers[]"), oldest first.
struct DumpTrigger {
  std::string reason;         // timeout, error, exit, signal, requested
  std::optional<double> at;   // unix seconds; absent when the writer did not say
};

// One rank's flight record.
struct RankDump {
  std::string file;
  std::string job_id;  // "" when the writer did not know it yet
  std::string hostname;  // the node the rank ran on; "" when the record does not say
  int rank = 0, world_size = 0;
  std::string reason;  // timeout, error, exit, signal, requested
  double dumped_at = 0;
  std::string timed_out_group;  // "" when null
  nlohmann::json trigger;       // null or the trigger object, as written
  std::vector<DumpTrigger> triggers;  // every dump of this process, this one last ([] when absent)
  DumpNow now;
  std::vector<DumpGroup> groups;
  const DumpGroup* group(const std::string& name) const;  // nullptr when the rank has no such group
  // The trigger's "error" message (reasons exit and error), else "".
  std::string error_message() const;
};

// The dumps of one job, sorted by rank.
struct DumpSet {
  std::string job_id;  // the first non-empty job_id, else ""
  int world_size = 0;
  std::vector<RankDump> dumps;
  const RankDump* dump_of(int rank) const;  // nullptr: that rank left no dump
  std::vector<int> missing_ranks() const;
};

RankDump parse_flight_dump(const nlohmann::json& j, const std::string& file);
RankDump read_flight_dump(const std::string& file);
// The dump files named by `inputs`: a directory contributes its flight.rank*.json (sorted), a file
// itself. UsageError for a missing path, a directory without dumps, or no input at all.
std::vector<std::string> find_flight_dumps(const std::vector<std::string>& inputs);
// Checks that `dumps` are of one job (see the contract above) and sorts them by rank.
// world_size_override > 0 replaces the dumps' world_size (which must still agree among them).
DumpSet check_dump_set(std::vector<RankDump> dumps, int world_size_override = 0);
// find_flight_dumps + read_flight_dump + check_dump_set.
DumpSet load_flight_dumps(const std::vector<std::string>& inputs, int world_size_override = 0);

}  // namespace shardtrain::hang
