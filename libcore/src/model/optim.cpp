#include "shardtrain/model/optim.hpp"

#include <algorithm>
#include <cmath>
#include <vector>
#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"

namespace shardtrain {

void OptimizerConfig::validate() const {
  auto bad = [](const std::string& what) { throw UsageError("optimizer config: " + what); };
  if (!(max_lr > 0)) bad("--lr must be positive (got " + std::to_string(max_lr) + ")");
  if (min_lr < 0 || min_lr > max_lr) bad("--min-lr must be in [0, lr] (got " + std::to_string(min_lr) + ")");
  if (warmup_steps < 0) bad("--warmup must be >= 0 (got " + std::to_string(warmup_steps) + ")");
  if (decay_steps < warmup_steps)
    bad("--decay-steps (" + std::to_string(decay_steps) + ") must be >= --warmup (" + std::to_string(warmup_steps) + ")");
  if (!(beta1 >= 0 && beta1 < 1)) bad("--beta1 must be in [0, 1) (got " + std::to_string(beta1) + ")");
  if (!(beta2 >= 0 && beta2 < 1)) bad("--beta2 must be in [0, 1) (got " + std::to_string(beta2) + ")");
  if (!(eps > 0)) bad("--eps must be positive (got " + std::to_string(eps) + ")");
  if (weight_decay < 0) bad("--weight-decay must be >= 0");
  if (grad_clip < 0) bad("--grad-clip must be >= 0 (0 disables clipping)");
}

double learning_rate(const OptimizerConfig& c, std::int64_t step) {
  if (step < c.warmup_steps) return c.max_lr * double(step + 1) / double(c.warmup_steps);
  if (step >= c.decay_steps) return c.min_lr;
  const double r = double(step - c.warmup_steps) / double(c.decay_steps - c.warmup_steps);
  return c.min_lr + 0.5 * (1.0 + std::cos(M_PI * r)) * (c.max_lr - c.min_lr);
}

double clip_factor(double grad_norm, double grad_clip) {
  if (grad_clip <= 0 || grad_norm <= grad_clip) return 1.0;
  return grad_clip / (grad_norm + 1e-6);
}

double grad_norm_squared(Backend& backend, const ParameterRegistry& registry, const float* grads) {
  double total = 0.0;
  for (const auto& unit : registry.units()) total += backend.sum_squares(grads + unit.begin, unit.size());
  return total;
}

double tensor_parallel_sum_squares(Backend& backend, const ParameterRegistry& registry, const float* grads,
                                   std::size_t begin, std::size_t end) {
  const bool count_replicated = registry.place().rank == 0;
  double total = 0.0;
  for (const auto& t : registry.tensors()) {
    const std::size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
    if (lo >= hi || (t.split == TpSplit::kReplicated && !count_replicated)) continue;
    total += backend.sum_squares(grads + (lo - begin), hi - lo);
  }
  return total;
}

double add_tensor_parallel_ranks(double mine, Communicator& tp) {
  std::vector<double> every(std::size_t(tp.size()));
  tp.all_gather(&mine, every.data(), 1);
  double total = 0.0;
  for (double s : every) total += s;
  return total;
}

double tensor_parallel_grad_norm_squared(Backend& backend, const ParameterRegistry& registry, const float* grads,
                                         Communicator& tp) {
  const std::size_t chunk = Backend::kReductionChunk;
  double total = 0.0;
  for (const auto& unit : registry.units()) {
    double unit_sum = 0.0;
    for (std::size_t first = unit.begin; first < unit.end; first += chunk) {
      const std::size_t last = std::min(unit.end, first + chunk);
      unit_sum += tensor_parallel_sum_squares(backend, registry, grads + first, first, last);
    }
    total += unit_sum;
  }
  return add_tensor_parallel_ranks(total, tp);
}

AdamW::AdamW(Backend& backend, const ParameterRegistry& registry, OptimizerConfig config)
    : backend_(backend),
      registry_(registry),
      config_(config),
      exp_avg_(backend, registry.total()),
      exp_avg_sq_(backend, registry.total()) {
  config_.validate();
}

AdamWArgs adamw_step_args(const OptimizerConfig& config, std::int64_t step, double lr) {
  const double t = double(step + 1);
  AdamWArgs args;
  args.lr = float(lr);
  args.beta1 = float(config.beta1);
  args.beta2 = float(config.beta2);
  args.eps = float(config.eps);
  args.bias_correction1 = float(1.0 - std::pow(config.beta1, t));
  args.bias_correction2 = float(1.0 - std::pow(config.beta2, t));
  return args;
}

void AdamW::update(float* params, const float* grads, std::int64_t step, double lr) {
  AdamWArgs args = adamw_step_args(config_, step, lr);
  for (const auto& tensor : registry_.tensors()) {
    args.weight_decay = tensor.weight_decay ? float(config_.weight_decay) : 0.0f;
    backend_.adamw_update(params + tensor.offset, grads + tensor.offset, exp_avg_.data() + tensor.offset,
                          exp_avg_sq_.data() + tensor.offset, tensor.numel, args);
  }
}

}  // namespace shardtrain
