// Vocabulary shared by the communicator, the flight recorder and the reports: collective kinds,
// element types (dtype.hpp), and the nccl-tests bus-bandwidth convention.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "shardtrain/base/dtype.hpp"

namespace shardtrain {

// Every operation a Communicator runs. The names (op_name) appear in flight records, timeout
// messages and summaries: "AllReduce", "AllReduceCanonical", "ReduceScatter", "AllGather",
// "Broadcast", "Barrier", "Split".
enum class CollectiveOp : int {
  kAllReduce = 0,
  kAllReduceCanonical,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kBarrier,
  kSplit,  // communicator split: a collective over the parent group
};
inline constexpr int kNumCollectiveOps = 7;
const char* op_name(CollectiveOp op);
// The operation op_name calls `name`; nothing for any other text.
std::optional<CollectiveOp> op_named(const std::string& name);

// Bus-bandwidth factor as nccl-tests defines it, for a group of n ranks:
//   AllReduce, AllReduceCanonical: 2(n-1)/n;  ReduceScatter, AllGather: (n-1)/n;  Broadcast: 1;
//   Barrier, Split: 0 (no payload).
// busbw = algbw x factor, algbw = bytes / seconds, where `bytes` is the nccl-tests "size" of the
// operation: the whole buffer for all-reduce and broadcast, the whole (n-block) output of
// all-gather, the whole (n-block) input of reduce-scatter (that is what Communicator records).
double bus_bandwidth_factor(CollectiveOp op, int n);
// Bytes per second (0 when seconds <= 0).
double bus_bandwidth(CollectiveOp op, std::uint64_t bytes, double seconds, int n);

}  // namespace shardtrain
