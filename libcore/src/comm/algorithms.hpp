// The engine's own algorithms over a Transport's point-to-point calls, and the polling loop that
// drives every transport request; both run on a communicator's communication thread only.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "shardtrain/comm/transport.hpp"
#include "scratch_buffer.hpp"

namespace shardtrain::comm_detail {

class Driver {
 public:
  // `waiters`: callers blocked in wait() (the loop then yields instead of napping). `abandon`:
  // asked every 256 polls whether to give the operation up (the communicator failed, or is being
  // destroyed and its drain time passed).
  Driver(Transport& transport, const std::atomic<int>& waiters, std::function<bool()> abandon);

  // Polls requests[0..n) until all complete (true) or abandon() says so (false).
  bool drive(TransportRequest* requests, int n);

  // All-reduce (sum) of data[0..n) in place by recursive halving (a reduce-scatter, pair distance
  // 1, 2, 4, ...) then recursive doubling (an all-gather, distance size/2 ... 1); the group size
  // must be a power of two. Every level adds lower rank + upper rank (on the host, or with
  // DeviceMemory::add where the transport's buffers are device memory: the same IEEE additions), so
  // the result is bitwise the
  // binary-tree sum of communicator.hpp (the canonical all-reduce) and the same on every rank.
  // `dtype` is kFloat32 or kFloat64. `seq` (the operation's sequence number) picks the tags, so
  // messages of consecutive operations never match. False when abandoned.
  bool halving_doubling(void* data, std::size_t n, DType dtype, std::uint64_t seq);

  // Reduce-scatter (sum) of in[size() x block] into out[block] (this rank's block r) by direct
  // exchange: this rank sends block q to each rank q and receives every rank's block r (all
  // posted at once), so each rank sends and receives (W-1)/W of the input once, any group size;
  // then out = block r of rank 0 + of rank 1 + ... in rank order (the same order on every run and
  // every transport). Open MPI 4.1's non-blocking reduce-scatter instead reduces the whole buffer
  // to one rank and scatters it back (measured over TCP at W = 2: three times the bytes on the
  // critical path, docs/PERFORMANCE.md). Scratch: (W-1) x block elements, kept. Host memory only;
  // `dtype` any but kUInt8 (integers wrap). in and out must not overlap. False when abandoned.
  bool pairwise_reduce_scatter(const void* in, void* out, std::size_t block, DType dtype, std::uint64_t seq);

  // Broadcast of data[0..count) from group rank `root`, in point-to-point messages (the root sends
  // to each rank in turn). Control data only (ids, names, checkpoint manifests): unlike a library
  // broadcast, whose behaviour with mismatched counts is undefined (Open MPI's ends the process),
  // each receive checks the message's size against its own count (transport.hpp), so ranks that
  // disagree fail the group and dump their records. Tags from `seq`. False when abandoned.
  bool linear_broadcast(void* data, std::size_t count, DType dtype, int root, std::uint64_t seq);

  // One rank's description of an operation, exchanged before any of its data moves
  // (exchange_headers): what every rank must agree on for the library or the engine to run it.
  struct OpHeader {
    std::uint64_t seq = 0, op = 0, dtype = 0, count = 0;
    std::int64_t root = -1;
    bool operator==(const OpHeader& o) const {
      return seq == o.seq && op == o.op && dtype == o.dtype && count == o.count && root == o.root;
    }
  };
  // Every group rank's header (all[q] from rank q; all[rank()] = mine): each rank sends its own to
  // every peer and receives every peer's (2 (size - 1) messages of 40 bytes, one round of latency),
  // so that every rank sees every disagreement and all fail the operation together, before a
  // library collective with mismatched counts can corrupt memory or end the process. Fixed-size
  // messages on the tag after the operation's algorithm tags (64 seq + 63), so they never match
  // data. Device transports (NCCL) get the headers through device scratch. False when abandoned.
  bool exchange_headers(const OpHeader& mine, std::vector<OpHeader>& all);

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // The transport gave up its requests (Transport::abandon): a receive still posted into the
  // scratch buffer may yet be written by the library, so the buffer is left allocated for the rest
  // of the process rather than freed with this driver. Later calls get a new one.
  void abandon_scratch();

  // Per group rank, what halving_doubling's exchanges with that peer moved and took since the
  // caller last zeroed them (communicator.hpp PeerStats): empty until the first exchange, then
  // size() entries, the own rank's zero. The engine adds them to its stats after each operation
  // and zeroes them (no allocation per operation).
  std::vector<PeerStats>& peer_stats() { return peer_stats_; }
  // Bytes of scratch space held (communicator.hpp CommStats::scratch_bytes).
  std::size_t scratch_bytes() const { return scratch_.bytes() + header_scratch_.bytes(); }

 private:
  template <typename T>
  bool halving_doubling_typed(T* data, std::size_t n, std::uint64_t seq);
  template <typename T>
  bool pairwise_reduce_scatter_typed(const T* in, T* out, std::size_t block, std::uint64_t seq);
  // One exchange with group rank `peer`, posted at `posted`, has completed.
  void count_exchange(int peer, std::size_t bytes_received, std::chrono::steady_clock::time_point posted);

  Transport& transport_;
  const std::atomic<int>& waiters_;
  std::function<bool()> abandon_;
  int tag_span_;  // distinct sequence numbers in halving/doubling tags (64 tags each)
  // halving_doubling's receive buffer, kept between calls so that large reductions neither allocate
  // nor fault pages in each time: host memory, or the device transport's (Transport::device_memory).
  ScratchBuffer scratch_;
  ScratchBuffer header_scratch_;  // exchange_headers' space on a device transport
  std::vector<PeerStats> peer_stats_;  // by group rank; sized on first use
};

}  // namespace shardtrain::comm_detail
