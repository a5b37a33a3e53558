// Vocabulary shared by the communicator, the flight recorder and the reports: collective kinds,
// element types, and the nccl-tests bus-bandwidth convention.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

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

// Element types of collective buffers. Names: float32 float64 int32 int64 uint64 uint8.
enum class DType : int { kFloat32 = 0, kFloat64, kInt32, kInt64, kUInt64, kUInt8 };
const char* dtype_name(DType t);
std::size_t dtype_size(DType t);

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return DType::kUInt64;
  else {
    static_assert(std::is_same_v<T, std::uint8_t>, "collectives take float, double, int32, int64, uint64 or uint8");
    return DType::kUInt8;
  }
}

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
