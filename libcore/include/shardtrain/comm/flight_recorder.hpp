// The flight recorder (contract 6): a per-rank ring buffer of the most recent collectives of every
// communicator group on this rank, so a hang can be diagnosed after the fact (hang-diagnose reads
// the dumps of all ranks and names the rank that is behind). Modelled on PyTorch c10d's
// flight recorder. Thread-safe: the communication thread, the watchdog and the caller all write it.
//
// One recorder is shared by a root communicator and every group split from it. Each entry has a
// recorder-wide id (0, 1, 2, ... in enqueue order) and its group's sequence number (1, 2, ... per
// group, counting every operation submitted on that group, including Split). Times are unix
// seconds (system clock, microsecond resolution) so records of different ranks line up.
//
// Dump format: docs/FORMATS.md "Flight record", shardtrain-flight-record(5).
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/comm/types.hpp"

namespace shardtrain {

// Lifecycle of one recorded operation:
//   queued    -> submitted by the caller, not yet issued to the transport (MPI)
//   started   -> issued; in flight
//   completed -> finished on this rank
//   timed_out -> exceeded the collective timeout (the trigger of a dump)
//   skipped   -> not issued, on purpose (fault injection skip-collective)
//   aborted   -> abandoned without completing: its communicator failed or was destroyed
enum class FlightState : int { kQueued = 0, kStarted, kCompleted, kTimedOut, kSkipped, kAborted };
const char* flight_state_name(FlightState s);

struct FlightEntry {
  std::uint64_t id = 0;      // recorder-wide, assigned by record()
  std::uint64_t seq = 0;     // per group, from 1
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::string group;         // group name (Communicator::name())
  DType dtype = DType::kFloat32;
  std::uint64_t numel = 0;   // elements of the caller's buffer (all-reduce, broadcast), of the
                             // per-rank block (reduce-scatter output, all-gather input)
  std::uint64_t bytes = 0;   // nccl-tests size (types.hpp): what the byte accounting counts
  int root = -1;             // broadcast root (group rank), -1 otherwise
  std::int64_t step = -1;    // Communicator::set_step value at submission (-1: never set)
  double t_enqueue = 0, t_start = 0, t_end = 0;  // unix seconds; 0 = not reached
  FlightState state = FlightState::kQueued;
  nlohmann::json to_json() const;
};

// Identity of a group as recorded in a dump.
struct FlightGroup {
  std::string name;
  int rank = 0, size = 1;            // this rank in the group, group size
  std::vector<int> world_ranks;      // world rank of each group rank
  std::uint64_t last_enqueued = 0;   // highest seq submitted (0: none)
  std::uint64_t last_started = 0;    // highest seq issued to the transport
  std::uint64_t last_completed = 0;  // highest seq completed
};

class FlightRecorder {
 public:
  explicit FlightRecorder(std::size_t capacity = 2048);

  std::size_t capacity() const { return capacity_; }

  // Registers a group; returns the name actually used (a repeated name gets "#2", "#3" ...).
  std::string register_group(const std::string& name, int rank, int size, std::vector<int> world_ranks);

  // Appends an entry (state queued, t_enqueue = now), overwriting the oldest when full. Returns its id.
  std::uint64_t record(FlightEntry entry);

  // State changes by id; stamping t_start (started) or t_end (completed, timed_out, aborted).
  // An id already overwritten by newer entries is ignored (group counters still advance).
  void mark(std::uint64_t id, FlightState state);

  // Entries oldest first; entries overwritten so far.
  std::vector<FlightEntry> snapshot() const;
  std::uint64_t dropped() const;

  // The whole record as JSON (see FORMATS.md). `trigger` describes why it was dumped (may be null).
  nlohmann::json to_json(int world_rank, int world_size, const std::string& reason,
                         const nlohmann::json& trigger) const;

  // Writes to_json(...) to `path` atomically (temporary file + rename). Throws IoError.
  void dump(const std::string& path, int world_rank, int world_size, const std::string& reason,
            const nlohmann::json& trigger) const;

  // Unix time now, seconds.
  static double now();

 private:
  std::size_t capacity_;
  mutable std::mutex mu_;
  std::vector<FlightEntry> ring_;  // ring_[id % capacity_]
  std::uint64_t next_id_ = 0;
  std::vector<FlightGroup> groups_;
};

}  // namespace shardtrain
