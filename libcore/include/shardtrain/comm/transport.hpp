// Transport (libcore `comm`): what the comm engine needs from a communication library, and nothing
// more. The engine (make_communicator below) owns everything else a Communicator does: the queue and
// its communication thread, sequence numbers, the flight recorder, the watchdog and timeouts, fault
// injection, accounting, and the algorithms built on the point-to-point calls here: halving/doubling
// all-reduce (canonical and fast) and the size-checked broadcast of control data. So a transport is small: MPI (mpi.hpp, CPU ranks), an in-process fake
// for tests (tests/fake_transport.hpp), NCCL (nccl.hpp, GPU ranks).
//
// A transport is one group of ranks (like an MPI communicator): `size()` ranks numbered 0..size-1.
//
// Threads: the engine reads a transport's identity (rank() ... max_count()) once, on the thread
// creating the communicator, and makes every other call from its communication thread, one at a
// time; a transport needs no locking of its own state beyond what its library requires for several
// transports running at once in one process.
//
// Non-blocking calls
//   * isend/irecv and the i* collectives start an operation and return a TransportRequest at once.
//   * test_all(requests, n) polls; it returns true once all n have completed, and then the
//     requests are spent (never tested again). While it returns false, no request is consumed.
//   * Buffers belong to the transport from the call until its request completes.
//   * Counts are elements of `dtype` (dtype.hpp), never bytes; each call takes at most max_count()
//     elements. Point-to-point calls are typed too (raw bytes: DType::kUInt8): one count limit then
//     holds for every call, and MPI and NCCL both take (count, type) for sends and receives.
//   * Collectives: every rank of the group calls the same ones in the same order (with the same
//     counts, dtype and root). Sums are the library's, in whatever order it adds; the engine's
//     canonical all-reduce, which fixes the order, uses isend/irecv only.
//   * Point-to-point messages between two ranks with the same tag arrive in the order sent. Tags are
//     0..max_tag(); collectives never match point-to-point messages.
//
// Where buffers live: a host transport (MPI, the fake) takes host memory only; a device transport
// (NCCL) takes memory of its device_memory() only. The engine moves a caller's buffer that lives on
// the other side through a staging copy around the whole operation (communicator.hpp, "Device
// buffers"), and the engine's own algorithms keep their scratch and do their additions where the
// transport's buffers live.
//
// Agreement (the engine, every operation of a group of more than one rank: the library's
// collectives, the engine's halving/doubling and broadcast, Split): before any of its data moves,
// the ranks exchange a 40-byte header (seq, op, dtype, element count, root) with every peer over
// isend/irecv. When the headers differ nothing is sent: every rank fails the group at once as for a
// transport error (flight record reason "error", detected_by "agreement", the trigger's "agreement"
// holding every rank's header), so a wrong count can neither corrupt a peer's memory nor end a rank
// inside the library. The message tells cause from effect: a rank holding the majority's header
// says "untrusted input from world rank(s) R: ..."; the odd rank says "this rank's ... disagrees with
// the majority's ...". SHARDTRAIN_NO_AGREEMENT_CHECK=1 turns the exchange off (to measure its cost).
//
// Failure: a call the library refuses throws CommunicationError, and so does a completed receive
// whose message had another size than its count (ranks that disagree on an operation's size must
// fail, not read short data). A request that never completes is
// the engine's business (timeout); the engine then calls abandon() and never touches the transport
// again except to destroy it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/base/dtype.hpp"
#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

// Handle of one non-blocking transport operation: an opaque word whose meaning only its transport
// knows (MPI: the MPI_Request; the fake: a table slot). The engine stores it and passes it back to
// test_all, nothing else. Value-initialised means nothing to the engine.
struct TransportRequest {
  std::uint64_t word = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // ---- identity ----
  virtual int rank() const = 0;        // in this group, 0..size()-1
  virtual int size() const = 0;        // of this group, >= 1
  virtual int world_rank() const = 0;  // in the job (names flight-record files and log prefixes)
  virtual int world_size() const = 0;
  virtual std::vector<int> world_ranks() const = 0;  // world rank of each group rank, size() entries
  // Short lower-case name of the library ("mpi", "fake"): CommStats::all_reduce_algorithm when the
  // library's all-reduce runs, and error messages.
  virtual const char* library_name() const = 0;
  virtual int max_tag() const = 0;               // largest point-to-point tag (>= 32767)
  virtual std::size_t max_count() const = 0;     // largest element count of one call
  // The device whose memory every buffer of this transport's calls must be in (NCCL: its GPU's), or
  // null for a host transport (the default).
  virtual DeviceMemory* device_memory() const { return nullptr; }

  // ---- point to point ----
  // `count` elements of `dtype` from `data` to group rank `peer` (!= rank()), tag in 0..max_tag().
  virtual TransportRequest isend(const void* data, std::size_t count, DType dtype, int peer, int tag) = 0;
  // `count` elements of `dtype` into `data` from group rank `peer`, the matching tag.
  virtual TransportRequest irecv(void* data, std::size_t count, DType dtype, int peer, int tag) = 0;

  // ---- library collectives (see the contract above) ----
  // Sum over the group, in place: data[0..count).
  virtual TransportRequest iall_reduce(void* data, std::size_t count, DType dtype) = 0;
  // Sum of in[size() * block], then rank r receives block r into out[block]. No overlap.
  virtual TransportRequest ireduce_scatter(const void* in, void* out, std::size_t block, DType dtype) = 0;
  // Concatenation in rank order: in[block] -> out[size() * block]. No overlap.
  virtual TransportRequest iall_gather(const void* in, void* out, std::size_t block, DType dtype) = 0;
  virtual TransportRequest ibarrier() = 0;

  // True when all of requests[0..n) have completed (then they are spent); false otherwise, with
  // none consumed. Never blocks.
  virtual bool test_all(TransportRequest* requests, int n) = 0;

  // ---- groups and teardown ----
  // Blocking and collective over this group: ranks passing the same color >= 0 form a child group,
  // its ranks ordered by (key, rank here); color < 0: this rank joins none and gets nullptr.
  virtual std::unique_ptr<Transport> split(int color, int key) = 0;
  // The engine gave up on the requests still pending (a timeout, or destruction with work in
  // flight): their buffers may still be written by the library until the process ends. The transport
  // must then not free anything those requests reference when destroyed (MPI: the communicator is
  // leaked on purpose), and must not block in its destructor.
  virtual void abandon() = 0;
};

// A Communicator (communicator.hpp) over `transport`, which it owns. Starts the communication
// thread and the watchdog. Throws UsageError for options the group cannot honour (a non-positive
// timeout; kHalvingDoubling on a group whose size is not a power of two).
std::unique_ptr<Communicator> make_communicator(std::unique_ptr<Transport> transport, CommOptions options);

}  // namespace shardtrain
