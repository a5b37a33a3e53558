// Optimizer: AdamW with decoupled weight decay (matrices and embeddings only), global-norm
// gradient clipping, and a learning-rate schedule of linear warmup then cosine decay to a floor.
// State (two moments) lives in flat device buffers aligned with the parameters (same offsets).
#pragma once
#include <cstdint>
#include <tuple>

#include "shardtrain/base/json_record.hpp"

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

struct OptimizerConfig {
  double max_lr = 6e-4;
  double min_lr = 6e-5;   // floor reached at decay_steps
  int warmup_steps = 10;  // lr ramps linearly over the first warmup_steps steps
  int decay_steps = 1000; // cosine decay from max_lr (at warmup) to min_lr (at decay_steps)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // global-norm clip; 0 disables

  void validate() const;  // throws UsageError naming the bad field
  // Written into the run config and the manifest's extra (never read back: a resume takes the
  // command line's).
  static auto fields() {
    using namespace json_fields;
    using O = OptimizerConfig;
    return std::tuple{key("max_lr", &O::max_lr), key("min_lr", &O::min_lr), key("warmup_steps", &O::warmup_steps),
                      key("decay_steps", &O::decay_steps), key("beta1", &O::beta1), key("beta2", &O::beta2),
                      key("eps", &O::eps), key("weight_decay", &O::weight_decay), key("grad_clip", &O::grad_clip)};
  }
  nlohmann::json to_json() const { return json_fields::write(*this); }
};

// Learning rate of 0-based step s:
//   s < warmup: max_lr (s+1)/warmup;  s >= decay_steps: min_lr;
//   else min_lr + 0.5 (1 + cos(pi r)) (max_lr - min_lr), r = (s - warmup)/(decay_steps - warmup).
double learning_rate(const OptimizerConfig& config, std::int64_t step);

// The clip factor for a global gradient norm: clip / (norm + 1e-6) when norm > clip, else 1
// (PyTorch's clip_grad_norm_).
double clip_factor(double grad_norm, double grad_clip);

// AdamW arguments of 0-based step `step` at learning rate lr (bias corrections for t = step + 1);
// weight_decay is left 0: the caller sets it per tensor (matrices and embeddings only).
AdamWArgs adamw_step_args(const OptimizerConfig& config, std::int64_t step, double lr);

// Squared global gradient norm, layout-independently (contract 2 of docs/ARCHITECTURE.md): per unit, the backend's chunked
// sum of squares over the unit (chunks start at the unit's first element), then the unit sums
// added in unit order. A sharded layout whose shards start at multiples of
// Backend::kReductionChunk within each unit reproduces it bitwise from per-chunk sums.
double grad_norm_squared(Backend& backend, const ParameterRegistry& registry, const float* grads);

// Tensor parallelism. A TP rank "counts" the elements of its split tensors, and of the replicated
// tensors (identical on every TP rank) only on TP rank 0, so that the counted elements of the T
// ranks are every logical element once. tensor_parallel_sum_squares is the sum of squares of the
// counted elements of the local flat range [begin, end) (grads points at element `begin`): the
// backend's sum_squares of each counted tensor piece, added left to right.
double tensor_parallel_sum_squares(Backend& backend, const ParameterRegistry& registry, const float* grads,
                                   std::size_t begin, std::size_t end);
// The squared global norm under TP, collective over the TP group: per unit, per chunk of
// Backend::kReductionChunk elements from the unit's start, tensor_parallel_sum_squares; chunk sums
// added in order, unit sums in order (so a ZeRO layout with chunk-aligned shards reproduces it
// bitwise from per-chunk sums, as for grad_norm_squared); then the T ranks' values, all-gathered,
// added in TP-rank order (add_tensor_parallel_ranks). Identical on every rank of the group and
// independent of the DP size; equal to the unsplit norm to rounding.
double tensor_parallel_grad_norm_squared(Backend& backend, const ParameterRegistry& registry, const float* grads,
                                         Communicator& tp);
// Collective over the TP group: the sum of every TP rank's `mine`, added in rank order.
double add_tensor_parallel_ranks(double mine, Communicator& tp);

class AdamW {
 public:
  AdamW(Backend& backend, const ParameterRegistry& registry, OptimizerConfig config);

  // One update of step `step` (0-based; the bias corrections use t = step + 1) with learning rate
  // lr. grads must already be clipped.
  void update(float* params, const float* grads, std::int64_t step, double lr);

  DeviceArray<float>& exp_avg() { return exp_avg_; }
  DeviceArray<float>& exp_avg_sq() { return exp_avg_sq_; }
  const OptimizerConfig& config() const { return config_; }

 private:
  Backend& backend_;
  const ParameterRegistry& registry_;
  OptimizerConfig config_;
  DeviceArray<float> exp_avg_, exp_avg_sq_;
};

}  // namespace shardtrain
