// Communicator (libcore `comm`): the collectives the parallel trainers need, asynchronous, with a
// per-group sequence number, a flight recorder, a timeout and byte/time accounting (contract 6 of docs/ARCHITECTURE.md).
// This header is the interface; one engine implements it over any Transport (transport.hpp:
// make_communicator), mpi.hpp creates it over MPI (CPU ranks, or GPU ranks with host staging) and nccl.hpp over NCCL.
//
// Execution model
//   * Every call submits an operation to the communicator's queue and returns a CollectiveHandle at
//     once; operations run strictly in submission order, one at a time, on a communication thread
//     owned by the communicator, so computation on the caller's thread overlaps them.
//   * All ranks of the group must submit the same operations in the same order (as with MPI).
//   * Buffers passed to an *_async call belong to the communicator until its handle completes: do
//     not read, write or free them before wait()/test() says so. Blocking variants (no _async)
//     submit and wait.
//   * Reductions are sums. all_reduce is in place. Counts are elements, not bytes.
//
// Timeouts (contract 6, c10d-style)
//   * Each operation must complete within the collective timeout (CommOptions::timeout, the tools'
//     --collective-timeout, default 300 s) counted from its submission.
//   * The first operation found late, by a waiting caller or by the watchdog thread (which checks
//     in-flight work every min(1 s, timeout/10), so a rank blocked elsewhere is caught too):
//       1. is marked timed_out in its group's flight recorder, and the flight record of the rank
//          (every live group of it, flight_recorder.hpp) is written as JSON to
//          <run_dir>/flight.rank<R>.json (R = world rank; docs/FORMATS.md "Flight record");
//       2. one line goes to stderr:
//          [rank R/W] collective timeout: AllReduce(seq=1208, group=dp, numel=..., bytes=...,
//          timeout_ms=...) after 300.2 s; flight record: PATH
//       3. the communicator becomes failed: every pending and later operation on it fails, every
//          wait()/test() throws CommunicationError (exit code 4) with that message; wait() first
//          lets `teardown_grace` (default 2 s) pass since the detection, so that peers timing out
//          at about the same moment write their flight records before this rank's exit tears the
//          job down (the tools MPI_Abort on the error).
//       4. `on_fatal`, if set, is called once from the watchdog thread `teardown_grace` after the
//          timeout was detected (so a rank stuck outside wait() still ends). The library itself
//          never exits: a tool passes a hook that ends the job (mpi_abort_on_fatal() in
//          mpi.hpp calls MPI_Abort(MPI_COMM_WORLD, 4)); the tool main also MPI_Aborts when
//          the CommunicationError reaches it, whichever comes first.
//     An operation stuck inside the transport cannot be cancelled: it is abandoned (its buffers may
//     still be written by the transport until the process ends; keep them alive), and the job is
//     expected to end. A failed communicator cannot be repaired; restart from the last checkpoint.
//
// Device buffers (CommOptions::device_memory): with a DeviceMemory set, a buffer may be host or
// device memory, operation by operation (a trainer on a GPU reduces device gradients and host loss
// sums on one communicator). A buffer on the other side of the transport's (transport.hpp, "Where
// buffers live") is staged: the engine copies the operation's inputs into a buffer where the
// transport wants them, runs the operation there (any algorithm, the canonical one included, so
// results are bitwise those of the same operation on unstaged buffers), and copies the outputs
// back before the operation completes. So the MPI transport serves ranks on a GPU ("host staging":
// W ranks sharing one GPU) and NCCL takes host control data. A buffer handed over must be complete
// in memory at submission (a GPU trainer synchronises its compute queue first). Without a
// DeviceMemory every buffer is taken to be where the transport wants it.
//
// Groups: split() makes a sub-group with its own name, sequence numbers and flight recorder.
//
// Phases and steps: every record carries the step (set_step) and the phase (phase.hpp) at
// submission: the communicator's fixed CommOptions::phase when set, else the process-wide one.
//
// Thread safety: submit from one thread at a time per communicator (the trainer's thread);
// handles may be waited on from any thread. set_step from the submitting thread.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/comm/types.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/fault_injection.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/phase.hpp"

namespace shardtrain {

// One submitted operation, as seen by its submitter. Implemented by the comm engine.
class Work {
 public:
  virtual ~Work() = default;
  // True when completed; false while queued or in flight. Throws CommunicationError when the
  // operation failed (its communicator timed out or was destroyed).
  virtual bool test() = 0;
  // Blocks until completed. Waiting past `timeout` (measured from now), or past the collective
  // timeout counted from submission, whichever comes first, is a collective timeout (see above:
  // dump, one line, communicator failed) and throws CommunicationError.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
  virtual void wait() = 0;  // until the collective timeout
  virtual std::uint64_t seq() const = 0;
};

// Value handle of a submitted operation (copyable; empty when default-constructed).
class CollectiveHandle {
 public:
  CollectiveHandle() = default;
  explicit CollectiveHandle(std::shared_ptr<Work> work) : work_(std::move(work)) {}
  bool valid() const { return work_ != nullptr; }
  bool test() { return !work_ || work_->test(); }
  void wait() {
    if (work_) work_->wait();
  }
  void wait(std::chrono::milliseconds timeout) {
    if (work_) work_->wait(timeout);
  }
  std::uint64_t seq() const { return work_ ? work_->seq() : 0; }

 private:
  std::shared_ptr<Work> work_;
};

// Called once when a communicator has failed (timeout): the thrown error's message is passed.
using FatalHook = std::function<void(const CommunicationError&)>;

// How all_reduce (the fast, non-canonical one) runs on floating-point data (--allreduce).
//   kHalvingDoubling: recursive halving (a reduce-scatter) then recursive doubling (an all-gather)
//     over point-to-point messages driven by the communication thread, the same algorithm as the
//     canonical all-reduce; needs a power-of-two group. Bandwidth-optimal like the library's, and
//     its communication thread used 2.5-2.7 ms of CPU per 13 MB gradient in 4 MiB buckets against
//     4.1-4.4 ms for Open MPI 4.1's non-blocking MPI_Iallreduce ("[comm-bench]",
//     docs/PERFORMANCE.md): with one core per rank that CPU is taken from the compute thread.
//   kLibrary: the transport library's own non-blocking all-reduce (MPI_Iallreduce).
//   kAuto: kHalvingDoubling on power-of-two groups, else kLibrary.
//   kHierarchical: topology-aware (hierarchical.hpp): on a group spanning several nodes, every
//     all-reduce is a reduce-scatter inside the node, an all-reduce across nodes on 1/L of the
//     bytes (L ranks per node) and an all-gather inside the node, over node-local and cross-node
//     sub-groups. Only make_hierarchical_communicator builds that; a communicator made with this
//     value directly runs its own (flat) all-reduce as kAuto does, and so does every group on one
//     node (or with one rank per node).
// Integer data always uses the library's. Either way the result is the same on every rank.
enum class AllReduceAlgorithm { kAuto, kHalvingDoubling, kLibrary, kHierarchical };
// The one table of its names (--allreduce), in the order messages and --help list them.
inline constexpr std::pair<const char*, AllReduceAlgorithm> kAllReduceAlgorithmNames[] = {
    {"auto", AllReduceAlgorithm::kAuto}, {"halving", AllReduceAlgorithm::kHalvingDoubling},
    {"mpi", AllReduceAlgorithm::kLibrary}, {"hierarchical", AllReduceAlgorithm::kHierarchical}};
// "auto" | "halving" | "mpi" | "hierarchical"; UsageError naming the choices otherwise.
AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& text);

struct CommOptions {
  std::string name = "world";                      // group name in records and messages
  std::chrono::milliseconds timeout{300000};       // collective timeout (--collective-timeout)
  std::string run_dir = ".";                       // where flight.rank<R>.json is written
  std::size_t recorder_capacity = 2048;            // flight-recorder ring entries (per group)
  FatalHook on_fatal;                              // see "Timeouts" above; empty: none
  std::chrono::milliseconds teardown_grace{2000};  // detection -> throw from wait() / on_fatal
  // kHalvingDoubling on a group (or split sub-group) whose size is not a power of two: UsageError.
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kAuto;
  // The phase stamped on every record of this communicator (and of its splits, unless split()
  // gives another); none: the process-wide current_phase() at each submission. For a group whose
  // work runs beside the step loop (the asynchronous checkpoint writer's: Phase::kCheckpoint).
  std::optional<Phase> phase;
  // The device whose buffers callers may pass (see "Device buffers"); null: host buffers only, or
  // a device transport's own device. Shared with split groups.
  std::shared_ptr<DeviceMemory> device_memory;
};

// Per-operation accounting of one communicator. Times in seconds, bytes as in types.hpp.
struct OpStats {
  std::uint64_t calls = 0;
  std::uint64_t bytes = 0;
  double busy_s = 0;  // time in flight: issued to the transport until completed (a wait for Request::after excluded)
  double cpu_s = 0;   // CPU time the communication thread spent driving it (copies, reductions, polling):
                      // where the thread shares a core with the compute thread, compute time it took
  bool operator==(const OpStats&) const = default;
};
// Per-peer accounting: what one rank's point-to-point exchanges with one peer moved and took,
// where the engine's own algorithms move the bytes (the halving/doubling all-reduce, flat or as
// the cross-node stage of a hierarchical one; the library's collectives and the broadcast of
// control data are not counted: their bytes move inside the library, or are a few bytes). Each
// exchange is a send to and a receive from the peer posted together; `seconds` runs from posting
// them to both completing, so it holds the time this rank waited for a late peer as well as the
// transfer: a reader takes, per pair, the lower of the two ends' figures (the later end waited for
// nobody; telemetry/network_straggler.hpp). Read on the communication thread with two clock reads
// per exchange: no extra message, no synchronisation.
struct PeerStats {
  std::uint64_t bytes = 0;  // bytes received from the peer
  double seconds = 0;       // the exchanges with it, posted to completed
  bool operator==(const PeerStats&) const = default;
};
struct CommLevel;
class JsonFile;  // base/json_file.hpp
struct CommStats {
  std::array<OpStats, kNumCollectiveOps> per_op{};  // this group's own operations
  double wait_s = 0;  // time callers spent blocked in wait() (the "exposed" communication), levels included
  // Bytes of scratch space the engine holds for the algorithms' receive buffers and staging copies
  // (grow-only: about half the largest all-reduce's bytes once it ran), levels included. Host memory
  // the caller did not allocate: the run summary counts it as communication memory.
  std::uint64_t scratch_bytes = 0;
  int group_size = 1;
  // What all_reduce on float data runs: "halving", the transport's library_name() ("mpi"), or
  // "hierarchical" (hierarchical.hpp).
  std::string all_reduce_algorithm = "mpi";
  // A hierarchical communicator's sub-groups (hierarchical.hpp), each with its own accounting; the
  // totals below include them. Empty for every other communicator.
  std::vector<CommLevel> levels;
  int nodes = 0, ranks_per_node = 0;  // with levels: the group's nodes, and its ranks per node (0: uneven)
  // With levels chosen by size (hierarchical.hpp kBySize): per operation, the smallest call (bytes)
  // that goes through the levels; kNeverHierarchical (~0): none. Empty otherwise.
  std::vector<std::pair<CollectiveOp, std::uint64_t>> hierarchical_from_bytes;
  // This group's own exchanges by peer world rank (see PeerStats); peer_totals() adds the levels'.
  std::map<int, PeerStats> peers;
  std::map<int, PeerStats> peer_totals() const;
  std::uint64_t total_bytes() const;
  double total_busy_s() const;  // comm_total_s of the step log
  double total_cpu_s() const;   // comm_cpu_s of the step log
  // Busy seconds of the levels inside nodes / across nodes (0 without levels).
  double level_busy_s(bool inter_node) const;
  // {"AllReduce": {"calls", "bytes", "busy_s", "cpu_s", "algbw_GBps", "busbw_GBps"}, ..., "total_bytes",
  //  "total_busy_s", "total_cpu_s", "wait_s", "allreduce_algorithm"}; ops never called are left out.
  // With levels also "levels": {NAME: {"inter_node": bool, that group's object}}, "intra_node_busy_s",
  // "inter_node_busy_s", "nodes" and "ranks_per_node"; with hierarchical_from_bytes also
  // "hierarchical_from_bytes": {OP: bytes or null (never)}.
  nlohmann::json to_json() const;
  // The one reader of that object (a run summary's "communication"): the counted fields back
  // (calls, bytes, busy_s, cpu_s per operation; group_size, wait_s, allreduce_algorithm; levels,
  // nodes, ranks_per_node, hierarchical_from_bytes), the derived ones (bandwidths, totals, the
  // levels' busy seconds) recomputed from them. `peers` is not in the JSON and stays empty.
  static CommStats from_json(const JsonFile& f, const std::string& at);
  bool operator==(const CommStats&) const;  // every field (defaulted in communicator.cpp)
};
// One sub-group of a hierarchical communicator.
struct CommLevel {
  std::string name;         // the sub-group's name ("dp.node", "dp.cross", ...)
  bool inter_node = false;  // its ranks are on different nodes
  CommStats stats;
  bool operator==(const CommLevel&) const;  // defaulted in communicator.cpp
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;         // in this group
  virtual int size() const = 0;         // of this group
  virtual int world_rank() const = 0;   // in the job (names the dump file and the log prefix)
  virtual int world_size() const = 0;
  virtual const std::string& name() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;

  // Sub-groups: ranks passing the same color form a group, ordered by (key, rank). Collective over
  // this group (queued like any operation, recorded as "Split"); blocks until done. The child is
  // named `name` (a name a live group of this rank already has gets "#2", "#3"...), counts its own
  // sequence numbers from 1 and has its own flight recorder (with the same capacity). It inherits
  // timeout, run_dir, on_fatal, teardown_grace, the all-reduce algorithm, the fixed phase unless
  // `phase` gives one, the step (set_step) as it is now, and the fault injection: shared, so a
  // skip-collective skips one collective among this communicator and its splits (select the
  // child's with group=NAME or phase=NAME); set_fault_injection on the child replaces it there.
  // color < 0: this rank joins no group and gets nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key, const std::string& name,
                                              std::optional<Phase> phase = std::nullopt) = 0;

  // ---- asynchronous collectives (see the execution model above) ----
  // Sum over the group, in place: data[0..n).
  template <typename T>
  CollectiveHandle all_reduce_async(T* data, std::size_t n) {
    return submit({CollectiveOp::kAllReduce, dtype_of<T>(), data, data, n, -1});
  }
  // Deterministic all-reduce (contract 2): size() must be a power of two (else UsageError). Every
  // element becomes the binary-tree sum over group ranks in fixed order: level 1 adds rank pairs
  // (0+1), (2+3), ...; level 2 ((0+1)+(2+3)), ...; always lower ranks + upper ranks. When each rank
  // holds the tree sum of its own contiguous, equal-sized, power-of-two run of micro-batches, the
  // result is bitwise the tree sum over all micro-batches, whatever the group size. The result is
  // bitwise identical on every rank. Recursive halving (pair distance 1, 2, 4, ...) then recursive
  // doubling: the same bytes on the wire as a bandwidth-optimal all-reduce, log2(size) rounds each.
  CollectiveHandle all_reduce_canonical_async(float* data, std::size_t n) {
    return submit({CollectiveOp::kAllReduceCanonical, DType::kFloat32, data, data, n, -1});
  }
  CollectiveHandle all_reduce_canonical_async(double* data, std::size_t n) {
    return submit({CollectiveOp::kAllReduceCanonical, DType::kFloat64, data, data, n, -1});
  }
  // Sum, then rank r receives block r: in[size() * block] -> out[block]. in and out must not overlap.
  // Host buffers: the engine's own exchange, each rank sending and receiving (W-1)/W of the input,
  // the blocks added in rank order (comm/algorithms.hpp); device transports: the library's.
  template <typename T>
  CollectiveHandle reduce_scatter_async(const T* in, T* out, std::size_t block) {
    return submit({CollectiveOp::kReduceScatter, dtype_of<T>(), in, out, block, -1});
  }
  // Concatenation in rank order: in[block] -> out[size() * block]. in and out must not overlap.
  template <typename T>
  CollectiveHandle all_gather_async(const T* in, T* out, std::size_t block) {
    return submit({CollectiveOp::kAllGather, dtype_of<T>(), in, out, block, -1});
  }
  // data[0..n) of group rank `root` to every rank.
  template <typename T>
  CollectiveHandle broadcast_async(T* data, std::size_t n, int root) {
    return submit({CollectiveOp::kBroadcast, dtype_of<T>(), data, data, n, root});
  }
  CollectiveHandle barrier_async() { return submit({CollectiveOp::kBarrier, DType::kUInt8, nullptr, nullptr, 0, -1}); }

  // ---- blocking variants: submit + wait() ----
  template <typename T>
  void all_reduce(T* data, std::size_t n) { all_reduce_async(data, n).wait(); }
  void all_reduce_canonical(float* data, std::size_t n) { all_reduce_canonical_async(data, n).wait(); }
  void all_reduce_canonical(double* data, std::size_t n) { all_reduce_canonical_async(data, n).wait(); }
  template <typename T>
  void reduce_scatter(const T* in, T* out, std::size_t block) { reduce_scatter_async(in, out, block).wait(); }
  template <typename T>
  void all_gather(const T* in, T* out, std::size_t block) { all_gather_async(in, out, block).wait(); }
  template <typename T>
  void broadcast(T* data, std::size_t n, int root) { broadcast_async(data, n, root).wait(); }
  void barrier() { barrier_async().wait(); }

  // ---- step, faults, accounting, records ----
  // The trainer's step number, stamped on every later record; drives skip-collective injection.
  // Per communicator (a group working beside the step loop sets the step it works for).
  virtual void set_step(std::int64_t step) = 0;
  virtual std::int64_t step() const = 0;
  // Faults for this communicator and the groups split from it later (off by default; validated
  // against world_size(), UsageError): the collective ones, skip-collective and wrong-count (the
  // phase faults act through PhaseFaultGuard, fault_injection.hpp). An empty FaultInjection turns
  // injection off.
  virtual void set_fault_injection(const FaultInjection& faults) = 0;

  // Sequence number the next submitted operation will get (the first is 1).
  virtual std::uint64_t next_seq() const = 0;
  // Accounting since construction.
  virtual CommStats stats() const = 0;
  // True once a timeout has failed this communicator.
  virtual bool failed() const = 0;
  // This group's recorder (the rank's whole record: flight_record_json in flight_recorder.hpp).
  virtual std::shared_ptr<FlightRecorder> recorder() const = 0;

  // A submitted operation; `send`/`recv` as in the typed calls above (`count` is n or block).
  // `after`: an operation, usually of another communicator of this rank, that must complete
  // before this one starts (its data are this one's input: the stages of a hierarchical
  // all-reduce, hierarchical.hpp). This group's communication thread waits for it when the
  // operation reaches the head of the queue, so later operations of this group wait too; the wait
  // counts against this operation's timeout, and a failure of `after` fails this operation (and
  // this group) with the failure's message. Empty: none. Never a later operation of this group.
  struct Request {
    CollectiveOp op;
    DType dtype;
    const void* send;
    void* recv;
    std::size_t count;
    int root;
    CollectiveHandle after = {};
    // The two-level collective this operation is a stage of (recorded in its flight-record entry);
    // null: a collective of its own.
    std::shared_ptr<const CollectivePart> part_of = nullptr;
  };
  virtual CollectiveHandle submit(const Request& request) = 0;
};

}  // namespace shardtrain
