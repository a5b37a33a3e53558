// The flight recorder (contract 6 of docs/ARCHITECTURE.md): for each communicator group, a ring buffer of its most recent
// operations, so a hang can be diagnosed after the fact (hang-diagnose reads the dumps of all ranks
// and names the rank that is behind). Modelled on PyTorch c10d's flight recorder. Thread-safe: the
// communication thread, the watchdog and the caller all write it.
//
// Every group (a root communicator and each group split from it) has its own recorder: its own
// ring, sequence numbers (1, 2, ... counting every operation submitted on it, including Split) and
// counters. A process-wide registry lists the live groups' recorders by world rank, so that one
// rank's dump holds every group of the rank: when an operation of one group times out, the other
// groups' last entries show what the rank was doing meanwhile. Entry ids order the entries of all
// groups of a rank by submission. Times are unix seconds (system clock, microsecond resolution)
// so records of different ranks line up.
//
// Dump format: docs/FORMATS.md "Flight record", shardtrain-flight-record(5).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/comm/phase.hpp"
#include "shardtrain/comm/types.hpp"

namespace shardtrain {

// Lifecycle of one recorded operation:
//   queued    -> submitted by the caller, not yet issued to the transport
//   started   -> issued; in flight
//   completed -> finished on this rank
//   timed_out -> exceeded the collective timeout (the trigger of a dump)
//   skipped   -> not issued, on purpose (fault injection skip-collective)
//   aborted   -> abandoned without completing: its communicator failed or was destroyed
enum class FlightState : int { kQueued = 0, kStarted, kCompleted, kTimedOut, kSkipped, kAborted };
const char* flight_state_name(FlightState s);

// The collective a recorded operation is one stage of, when it is one: the node, cross-node and
// node-gather stages (and the flat tail) of one two-level collective (hierarchical.hpp). `group` is
// the communicator the caller submitted the call on, `collective` its number among that group's
// two-level collectives (1, 2, ...: the same on every rank, which makes the same calls in the same
// order), `op` and `numel` the call as the caller made it. The stages of one collective are the
// entries with equal (group, collective); on a rank they are submitted in chain order (increasing
// id), a later stage "queued" until the earlier one it takes its input from completes, so
// hang-diagnose reads a rank queued in a later stage as waiting in the earlier one.
struct CollectivePart {
  std::string group;
  std::uint64_t collective = 0;
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::uint64_t numel = 0;
  nlohmann::json to_json() const;  // FORMATS.md "entries[].part_of"
};

struct FlightEntry {
  std::uint64_t id = 0;      // assigned by record(): increasing in submission order over all groups
                             // of the process (so of the rank), not consecutive within one group
  std::uint64_t seq = 0;     // per group, from 1
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::string group;         // group name (Communicator::name())
  DType dtype = DType::kFloat32;
  std::uint64_t numel = 0;   // elements of the caller's buffer (all-reduce, broadcast), of the
                             // per-rank block (reduce-scatter output, all-gather input)
  std::uint64_t bytes = 0;   // nccl-tests size (types.hpp): what the byte accounting counts
  int root = -1;             // broadcast root (group rank), -1 otherwise
  std::int64_t step = -1;    // Communicator::set_step value at submission (-1: never set)
  Phase phase = Phase::kSetup;  // at submission: the group's fixed phase, else the process-wide one
  double t_enqueue = 0, t_start = 0, t_end = 0;  // unix seconds; 0 = not reached
  FlightState state = FlightState::kQueued;
  std::shared_ptr<const CollectivePart> part_of;  // null: a collective of its own (key left out)
  nlohmann::json to_json() const;
};

// Identity of a group as recorded in a dump, and its counters.
struct FlightGroup {
  std::string name;
  int rank = 0, size = 1;            // this rank in the group, group size
  std::vector<int> world_ranks;      // world rank of each group rank
  std::optional<Phase> phase;        // the group's fixed phase (CommOptions::phase); none: process-wide
  std::uint64_t last_enqueued = 0;   // highest seq submitted (0: none)
  std::uint64_t last_started = 0;    // highest seq issued to the transport
  std::uint64_t last_completed = 0;  // highest seq completed
};

// One group's recorder.
class FlightRecorder {
 public:
  // capacity 0: off (record and mark do nothing; the dump shows the group with no entries and
  // zero counters): the switch that measures the recorder's cost.
  FlightRecorder(FlightGroup group, std::size_t capacity = 2048);

  const std::string& name() const { return group_.name; }  // fixed at construction

  // Appends an entry (state queued, t_enqueue = now, id assigned), overwriting the oldest when full.
  // Returns the ticket that mark() takes.
  std::uint64_t record(FlightEntry entry);

  // State changes by ticket; stamping t_start (started) or t_end (completed, timed_out, aborted).
  // A ticket already overwritten by newer entries is ignored (the group counters still advance).
  void mark(std::uint64_t ticket, FlightState state);

  // Entries oldest first; entries overwritten so far.
  std::vector<FlightEntry> snapshot() const;
  std::uint64_t dropped() const;

  // The oldest entry (by t_enqueue) still queued, started or timed out: the operation this group
  // is waiting on, or nothing when every recorded operation finished. O(capacity) under the lock;
  // meant for a monitor's occasional look (a metrics scrape), not for every operation.
  std::optional<FlightEntry> oldest_unfinished() const;

  // This group's object in a dump (FORMATS.md "groups[]"): identity, counters, capacity, dropped,
  // entries.
  nlohmann::json to_json() const;

  // Unix time now, seconds.
  static double now();

 private:
  std::size_t capacity_;
  mutable std::mutex mu_;
  FlightGroup group_;
  std::vector<FlightEntry> entries_locked() const;  // oldest first; mu_ held
  std::uint64_t dropped_locked() const { return next_ticket_ > capacity_ ? next_ticket_ - capacity_ : 0; }

  std::vector<FlightEntry> ring_;  // ring_[ticket % capacity_]
  std::uint64_t next_ticket_ = 0;
};

// ---- the rank's flight record: every live group in one file ----

// A recorder for a new group of `world_rank`, listed in the registry until retired. Its name is
// group.name, or, when a live group of that rank already has that name, the name with "#2", "#3"...
// (the first free one): names stay unique within a dump, and agree across ranks that create the
// same groups in the same order.
std::shared_ptr<FlightRecorder> register_flight_recorder(int world_rank, FlightGroup group, std::size_t capacity);
// The oldest unfinished operation (FlightRecorder::oldest_unfinished) over every live group of
// `world_rank`; nothing when none is in flight. Safe from any thread while the groups work.
std::optional<FlightEntry> oldest_in_flight(int world_rank);
// Takes a recorder out of the registry (its communicator is gone); unknown ones are ignored.
void retire_flight_recorder(const FlightRecorder* recorder);

// The job's identity in every dump ("job_id": the same on every rank of one launch, so dumps of
// different jobs are never read together); "" until set.
void set_flight_job_id(const std::string& job_id);
std::string flight_job_id();

// The flight record of `world_rank` (FORMATS.md, format_version 3): every live group registered
// for it in creation order (then the groups of its previous dump that are gone since, "live":
// false, so a dump written while the rank unwinds loses nothing), the process's phase state (`now`, `phases`), and every trigger this
// rank's dumps had so far plus this one (`triggers`). `reason` is timeout, error, exit, signal or
// requested; `trigger` its object (for a timeout or error the operation: its "group" becomes
// "timed_out_group"), or null. The top-level reason and trigger are the first failure's (timeout,
// error, exit) when there was one, else this one's.
nlohmann::json flight_record_json(int world_rank, int world_size, const std::string& reason,
                                  const nlohmann::json& trigger);
// Writes the record to `path` atomically (temporary file + rename; dumps of one process are
// serialised), without fsync (Durability::kVisible: a dump on SIGTERM must be whole before
// mpirun's SIGKILL a second later), and remembers the trigger for the rank's later dumps.
// Throws IoError.
void write_flight_record(const std::string& path, int world_rank, int world_size, const std::string& reason,
                         const nlohmann::json& trigger);
// Forgets the remembered triggers (a new job in the same process: the trainer's tests).
void forget_flight_triggers();

}  // namespace shardtrain
