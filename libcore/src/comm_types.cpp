#include "shardtrain/comm_types.hpp"

namespace shardtrain {

const char* op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "AllReduce";
    case CollectiveOp::kAllReduceCanonical: return "AllReduceCanonical";
    case CollectiveOp::kReduceScatter: return "ReduceScatter";
    case CollectiveOp::kAllGather: return "AllGather";
    case CollectiveOp::kBroadcast: return "Broadcast";
    case CollectiveOp::kBarrier: return "Barrier";
    case CollectiveOp::kSplit: return "Split";
  }
  return "Unknown";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt64: return "uint64";
    case DType::kUInt8: return "uint8";
  }
  return "unknown";
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt64: return 8;
    case DType::kUInt8: return 1;
  }
  return 1;
}

double bus_bandwidth_factor(CollectiveOp op, int n) {
  if (n <= 0) return 0.0;
  switch (op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kAllReduceCanonical: return 2.0 * (n - 1) / n;
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather: return double(n - 1) / n;
    case CollectiveOp::kBroadcast: return 1.0;
    case CollectiveOp::kBarrier:
    case CollectiveOp::kSplit: return 0.0;
  }
  return 0.0;
}

double bus_bandwidth(CollectiveOp op, std::uint64_t bytes, double seconds, int n) {
  if (seconds <= 0) return 0.0;
  return double(bytes) / seconds * bus_bandwidth_factor(op, n);
}

}  // namespace shardtrain
