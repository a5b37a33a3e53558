// The table of what each backend runs (capabilities.hpp). A backend that gains an op changes its
// row here, and every planner, trainer and scale-bench plan follows.
#include "shardtrain/backend/capabilities.hpp"

namespace shardtrain {

namespace {

BackendCapabilities cpu_capabilities() {
  BackendCapabilities c;
  c.device = DeviceKind::kCpu;
  c.precisions[std::size_t(Precision::kFp32)] = true;  // oneDNN and the vector loops compute in fp32
  c.default_precision = Precision::kFp32;
  c.tensor_parallel = true;
  c.zero_stages = {true, true, true, true};
  c.attention_state = AttentionState::kSoftmaxProbabilities;
  return c;
}

BackendCapabilities cuda_capabilities() {
  BackendCapabilities c;
  c.device = DeviceKind::kCuda;
  c.precisions[std::size_t(Precision::kFp32)] = true;
  c.precisions[std::size_t(Precision::kBf16)] = true;
  c.default_precision = Precision::kBf16;
  c.tensor_parallel = false;
  c.no_tensor_parallel = "the CUDA backend has no vocabulary-slice kernels yet";
  // The ZeRO strategies hand their shards to MPI directly, which needs host-addressable buffers.
  c.zero_stages = {true, false, false, false};
  c.no_zero = "ZeRO stages need host-addressable buffers for MPI in this version";
  c.attention_state = AttentionState::kLogSumExp;
  return c;
}

}  // namespace

const BackendCapabilities& backend_capabilities(DeviceKind device) {
  static const BackendCapabilities cpu = cpu_capabilities(), cuda = cuda_capabilities();
  return device == DeviceKind::kCuda ? cuda : cpu;
}

}  // namespace shardtrain
