#include "shardtrain/comm/types.hpp"

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

std::optional<CollectiveOp> op_named(const std::string& name) {
  for (int i = 0; i < kNumCollectiveOps; ++i)
    if (name == op_name(CollectiveOp(i))) return CollectiveOp(i);
  return std::nullopt;
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
