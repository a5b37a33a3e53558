// The layout planner (layout_plan.hpp): the structural checks in the order of LayoutRefusal, then
// the memory estimate against the budget, whose refusal searches for a layout that fits among
// those the same checks accept (so it never suggests what this backend would refuse).
#include "shardtrain/parallel/layout_plan.hpp"

#include <algorithm>
#include <cstdio>

#include "shardtrain/model/parameters.hpp"

namespace shardtrain {

namespace {

std::string bytes_text(double b) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f bytes (%.1f MiB)", b, b / (1024.0 * 1024.0));
  return buf;
}

std::string layout_name(int stage, int tp) {
  return (stage == 0 ? std::string("DDP") : "ZeRO-" + std::to_string(stage)) +
         (tp > 1 ? " x TP " + std::to_string(tp) : std::string());
}

// The devices whose backends compute in `p`, for the precision refusal ("--device cuda").
std::string devices_computing_in(Precision p) {
  std::string s;
  for (const auto& [name, device] : kDeviceKindNames)
    if (backend_capabilities(device).computes_in(p)) s += std::string(s.empty() ? "" : " or ") + "--device " + name;
  return s;
}

const char* device_name(DeviceKind device) {
  for (const auto& [name, kind] : kDeviceKindNames)
    if (kind == device) return name;
  return "?";
}

struct Refusal {
  LayoutRefusal reason;
  std::string message;
};

// Everything but memory, in the order of LayoutRefusal.
std::optional<Refusal> structural_refusal(const LayoutRequest& r) {
  const BackendCapabilities& caps = r.capabilities;
  if (r.world < 1) return Refusal{LayoutRefusal::kWorld, "the job needs at least 1 rank (got " + std::to_string(r.world) + ")"};
  if (r.zero_stage < 0 || r.zero_stage > 3)
    return Refusal{LayoutRefusal::kZeroStage,
                   "--zero-stage must be 0 (DDP), 1, 2 or 3 (got " + std::to_string(r.zero_stage) + ")"};
  if (r.precision && !caps.computes_in(*r.precision))
    return Refusal{LayoutRefusal::kPrecision,
                   std::string("--precision ") + precision_name(*r.precision) + " needs " +
                       devices_computing_in(*r.precision) + " (the " + device_name(caps.device) +
                       " backend computes in " + precision_name(caps.default_precision) + "); use --precision " +
                       precision_name(caps.default_precision) + " or auto on " + device_name(caps.device)};
  if (r.tp > 1 && !caps.tensor_parallel)
    return Refusal{LayoutRefusal::kTensorParallelDevice,
                   "--tp " + std::to_string(r.tp) + " does not run on --device " + device_name(caps.device) + " in this version (" +
                       caps.no_tensor_parallel + "); use --tp 1 on " + device_name(caps.device)};
  try {
    validate_tensor_parallel(r.model, r.tp);  // the shape: T divides n_head and 4 x d_model
  } catch (const UsageError& e) {
    return Refusal{LayoutRefusal::kTensorParallelShape, e.what()};
  }
  try {
    validate_tensor_parallel(r.model, r.tp, r.world);  // the shape holds, so only the world remains
  } catch (const UsageError& e) {
    return Refusal{LayoutRefusal::kTensorParallelWorld, e.what()};
  }
  if (!caps.runs_zero_stage(r.zero_stage))
    return Refusal{LayoutRefusal::kZeroDevice, "--zero-stage " + std::to_string(r.zero_stage) + " does not run on --device " +
                                                   device_name(caps.device) + " (" + caps.no_zero + "); use ddp-train " +
                                                   "(--zero-stage 0) there, or --device cpu"};
  return std::nullopt;
}

// Micro-batches per DP rank (at least 1: a global batch below one micro-batch per rank still runs
// one; whether the batch divides is the schedule's check, data::grad_accum_for).
int grad_accum_of(const LayoutRequest& r) {
  const std::int64_t dp = r.world / r.tp;
  return int(std::max<std::int64_t>(1, r.global_batch / (std::int64_t(r.micro_batch) * dp)));
}

MemoryEstimate memory_of(const LayoutRequest& r) {
  return estimate_memory(r.model, r.zero_stage, r.world, r.micro_batch, grad_accum_of(r), r.deterministic, r.tp,
                         r.capabilities.device);
}

// What --memory-budget holds against: the estimate plus what the process holds besides it (its
// code, libraries and MPI, allocator slack: process_overhead_bytes), so a budget is the memory a
// rank's process may take, the figure an operator sets from the node's memory.
double budgeted_bytes(const LayoutRequest& r, const MemoryEstimate& m) {
  return m.total() + process_overhead_bytes(r.capabilities.device);
}

// A layout the planner accepts that fits the budget: a higher stage, a larger TP degree on the same
// ranks (it also divides the activations), or ZeRO-3 (or this stage, where ZeRO-3 does not run) on
// more ranks; "" when none does.
std::string fitting_alternative(const LayoutRequest& r) {
  const double budget = r.memory_budget;
  auto fits = [&](const LayoutRequest& c, double& bytes) {
    if (structural_refusal(c)) return false;
    bytes = budgeted_bytes(c, memory_of(c));
    return bytes <= budget;
  };
  double bytes = 0;
  for (int s = r.zero_stage + 1; s <= 3; ++s) {
    LayoutRequest c = r;
    c.zero_stage = s;
    if (fits(c, bytes))
      return "--zero-stage " + std::to_string(s) + (r.tp > 1 ? " --tp " + std::to_string(r.tp) : std::string()) + " at " +
             std::to_string(r.world) + " ranks needs " + bytes_text(bytes);
  }
  for (int t = r.tp * 2; t <= r.world; t *= 2) {
    LayoutRequest c = r;
    c.tp = t;
    if (fits(c, bytes))
      return "--tp " + std::to_string(t) + (r.zero_stage > 0 ? " --zero-stage " + std::to_string(r.zero_stage) : std::string()) +
             " at " + std::to_string(r.world) + " ranks needs " + bytes_text(bytes) + " per rank";
  }
  const int stage = r.capabilities.runs_zero_stage(3) ? 3 : r.zero_stage;
  for (int w = r.world * 2; w <= 1024; w *= 2) {
    if (r.global_batch % (std::int64_t(r.micro_batch) * w) != 0) continue;
    LayoutRequest c = r;
    c.world = w;
    c.tp = 1;
    c.zero_stage = stage;
    if (fits(c, bytes))
      return (stage > 0 ? "--zero-stage " + std::to_string(stage) : std::string("DDP")) + " at " + std::to_string(w) +
             " ranks needs " + bytes_text(bytes) + " per rank";
  }
  return "";
}

}  // namespace

const char* layout_refusal_name(LayoutRefusal reason) {
  switch (reason) {
    case LayoutRefusal::kWorld: return "world";
    case LayoutRefusal::kZeroStage: return "zero_stage";
    case LayoutRefusal::kPrecision: return "precision";
    case LayoutRefusal::kTensorParallelDevice: return "tensor_parallel_device";
    case LayoutRefusal::kTensorParallelShape: return "tensor_parallel_shape";
    case LayoutRefusal::kTensorParallelWorld: return "tensor_parallel_world";
    case LayoutRefusal::kZeroDevice: return "zero_device";
    case LayoutRefusal::kMemoryBudget: return "memory_budget";
  }
  return "?";
}

std::vector<StateKind> sharded_state_kinds(int stage) {
  std::vector<StateKind> kinds;
  if (stage >= 1) kinds = {StateKind::kExpAvg, StateKind::kExpAvgSq};
  if (stage >= 2) kinds.push_back(StateKind::kGradients);
  if (stage >= 3) kinds.push_back(StateKind::kParameters);
  return kinds;
}

bool LayoutPlan::shards(StateKind kind) const { return std::find(sharded.begin(), sharded.end(), kind) != sharded.end(); }

std::string LayoutPlan::describe() const {
  return layout_name(zero_stage, tp) + " at " + std::to_string(world) + " rank" + (world == 1 ? "" : "s") +
         (tp > 1 ? " (dp " + std::to_string(dp) + ")" : "");
}

const LayoutPlan& LayoutDecision::value() const {
  if (!plan) throw LayoutRefused(*refusal, message);
  return *plan;
}

LayoutDecision plan_layout(const LayoutRequest& r) {
  if (r.micro_batch < 1) throw UsageError("--micro-batch must be at least 1 (got " + std::to_string(r.micro_batch) + ")");
  if (r.global_batch < 1)
    throw UsageError("--global-batch must be at least 1 (got " + std::to_string(r.global_batch) + ")");
  LayoutDecision d;
  if (auto refused = structural_refusal(r)) {
    d.refusal = refused->reason;
    d.message = refused->message;
    return d;
  }
  LayoutPlan p;
  p.world = r.world;
  p.tp = r.tp;
  p.dp = r.world / r.tp;
  p.zero_stage = r.zero_stage;
  p.precision = r.precision.value_or(r.capabilities.default_precision);
  p.grad_accum = grad_accum_of(r);
  p.sharded = sharded_state_kinds(r.zero_stage);
  p.memory = memory_of(r);
  if (r.memory_budget > 0 && budgeted_bytes(r, p.memory) > r.memory_budget) {
    std::string fit = fitting_alternative(r);
    if (fit.empty())
      fit = "no stage, tensor-parallel degree or world size up to 1024 ranks fits at this --micro-batch; lower --micro-batch";
    const MemoryEstimate& need = p.memory;
    const double process = process_overhead_bytes(r.capabilities.device);
    d.refusal = LayoutRefusal::kMemoryBudget;
    d.message = layout_name(r.zero_stage, r.tp) + " at " + std::to_string(r.world) + " rank" + (r.world == 1 ? "" : "s") +
                " needs " + bytes_text(budgeted_bytes(r, need)) + " per rank (model state " + bytes_text(need.model_state) +
                ", working buffers " + bytes_text(need.gathered + need.communication) + ", activations " +
                bytes_text(need.activations) + (process > 0 ? ", the process itself " + bytes_text(process) : std::string()) +
                "), over --memory-budget " + bytes_text(r.memory_budget) + "; " + fit;
    return d;
  }
  d.plan = std::move(p);
  return d;
}

}  // namespace shardtrain
