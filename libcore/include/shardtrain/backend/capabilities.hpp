// What each backend can run, published as data so that a layout is planned -- and refused -- in
// one place (parallel/layout_plan.hpp) before any backend, communicator or device exists. A
// capability here is a property of the backend's code, not of the machine: the CUDA backend's
// entry is the same in a CPU-only build (whether a GPU can be had is make_cuda_backend's question).
#pragma once
#include <array>

#include "shardtrain/backend/backend.hpp"

namespace shardtrain {

// What attention_forward keeps for attention_backward (its `att` buffer), per (B, NH, T):
//   kSoftmaxProbabilities  the probabilities, B x NH x T x T floats (the CPU backend);
//   kLogSumExp             the log-sum-exp of each query row, B x NH x T floats (the fused CUDA
//                          kernel: backward recomputes the probabilities tile by tile).
enum class AttentionState { kSoftmaxProbabilities, kLogSumExp };

struct BackendCapabilities {
  DeviceKind device = DeviceKind::kCpu;
  // The precisions its matrix products compute in (backend.hpp Precision), and the one
  // --precision auto picks.
  std::array<bool, 2> precisions{};  // indexed by Precision
  Precision default_precision = Precision::kFp32;
  // Tensor parallelism: the backend has the vocabulary-slice ops (embedding_*_slice,
  // crossentropy_slice_*). Without them every --tp above 1 is refused; `no_tensor_parallel` says why.
  bool tensor_parallel = false;
  const char* no_tensor_parallel = "";
  // zero_stages[s]: the strategies of ZeRO stage s (0 = DDP, full replicas) run on its buffers;
  // `no_zero` says why the others do not.
  std::array<bool, 4> zero_stages{};
  const char* no_zero = "";
  AttentionState attention_state = AttentionState::kSoftmaxProbabilities;

  bool computes_in(Precision p) const { return precisions[std::size_t(p)]; }
  bool runs_zero_stage(int stage) const { return stage >= 0 && stage < 4 && zero_stages[std::size_t(stage)]; }
};

// The published capabilities of the backend of kind `device` (a static table: cheap, pure).
const BackendCapabilities& backend_capabilities(DeviceKind device);

}  // namespace shardtrain
