// The engine's own algorithms over a Transport's point-to-point calls, and the polling loop that
// drives every transport request; both run on a communicator's communication thread only.
#pragma once
#include <atomic>
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

  // Broadcast of data[0..count) from group rank `root`, in point-to-point messages (the root sends
  // to each rank in turn). Control data only (ids, names, checkpoint manifests): unlike a library
  // broadcast, whose behaviour with mismatched counts is undefined (Open MPI's ends the process),
  // each receive checks the message's size against its own count (transport.hpp), so ranks that
  // disagree fail the group and dump their records. Tags from `seq`. False when abandoned.
  bool linear_broadcast(void* data, std::size_t count, DType dtype, int root, std::uint64_t seq);

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // The transport gave up its requests (Transport::abandon): a receive still posted into the
  // scratch buffer may yet be written by the library, so the buffer is left allocated for the rest
  // of the process rather than freed with this driver. Later calls get a new one.
  void abandon_scratch();

 private:
  template <typename T>
  bool halving_doubling_typed(T* data, std::size_t n, std::uint64_t seq);

  Transport& transport_;
  const std::atomic<int>& waiters_;
  std::function<bool()> abandon_;
  int tag_span_;  // distinct sequence numbers in halving/doubling tags (64 tags each)
  // halving_doubling's receive buffer, kept between calls so that large reductions neither allocate
  // nor fault pages in each time: host memory, or the device transport's (Transport::device_memory).
  ScratchBuffer scratch_;
};

}  // namespace shardtrain::comm_detail
