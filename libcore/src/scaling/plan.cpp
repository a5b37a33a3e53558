#include "shardtrain/scaling/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "shardtrain/backend/capabilities.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/number_text.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/parallel/layout_plan.hpp"

namespace shardtrain::scaling {
namespace {

std::string gb(double bytes) { return number_text("%.2f GB", bytes / 1e9); }

}  // namespace

// Assumption: a GPT-2 shaped decoder with d_model about 128 x n_layer (GPT-3's 6.7B model: 32 x
// 4096), d_model a multiple of 64 and 64-wide heads. L0 is the smallest n_layer for which
// d_model = 128 x L0 reaches `params`. Among the shapes with n_layer within a quarter of L0 and a
// count within 5% of `params`, the one whose head count has the most factors of two (up to 8) wins,
// then the aspect nearest 128, then the nearest count: the nearest count alone often gave a prime
// head count (33 heads at 1.3e9, 37 at 2.7e9), which no TP degree above 1 divides, where real
// models pick TP-friendly widths (32 and 40 heads at 6.7B and 13B). With no shape within 5%, the
// nearest count at L0. The count (reported) differs from `params` by at most a few percent; the
// memory formulas use the built model's own count.
ModelConfig model_for_parameter_count(double params, int vocab, int seq_len) {
  if (!(params >= 1000) || params > 1e13) throw UsageError("--params " + number_text("%g", params) + " is not in [1000, 1e13]");
  if (vocab < 1 || seq_len < 1) throw UsageError("--vocab and --seq-len must be >= 1");
  ModelConfig c;
  c.vocab = vocab;
  c.seq_len = seq_len;
  auto count = [&](int L, int C) {
    ModelConfig t = c;
    t.n_layer = L;
    t.d_model = C;
    return double(t.parameter_count());
  };
  int L0 = 1;
  while (L0 < 1000 && count(L0, 128 * L0) < params) ++L0;
  const auto twos = [](int heads) {  // factors of two in the head count, at most 3 (TP 8)
    int k = 0;
    while (k < 3 && heads % 2 == 0) heads /= 2, ++k;
    return k;
  };
  struct Shape {
    int L, C;
    double miss;  // |count - params|
  };
  // Better: within 5%, then more factors of two, then the aspect nearer 128, then the nearer count.
  const auto better = [&](const Shape& a, const Shape& b) {
    const bool ca = a.miss <= 0.05 * params, cb = b.miss <= 0.05 * params;
    if (ca != cb) return ca;
    if (!ca) return a.L == L0 && (b.L != L0 || a.miss < b.miss);  // none close: nearest at L0
    if (twos(a.C / 64) != twos(b.C / 64)) return twos(a.C / 64) > twos(b.C / 64);
    const double aspect_a = std::fabs(double(a.C) / a.L - 128), aspect_b = std::fabs(double(b.C) / b.L - 128);
    if (aspect_a != aspect_b) return aspect_a < aspect_b;
    return a.miss < b.miss;
  };
  Shape best{L0, 64, std::fabs(count(L0, 64) - params)};
  for (int L = std::max(1, L0 - L0 / 4); L <= L0 + L0 / 4; ++L)
    for (int C = 64; C <= 128 * L + 64 * (1 + L / 4); C += 64) {
      const Shape s{L, C, std::fabs(count(L, C) - params)};
      if (better(s, best)) best = s;
    }
  c.n_layer = best.L;
  c.d_model = best.C;
  c.n_head = best.C / 64;
  c.validate();
  return c;
}

std::string Plan::text() const {
  const std::string what = model_name.empty() ? number_text("%.4g", params) + " parameters as a GPT-2 shaped model"
                                              : model_name;
  std::string s = "plan: " + what + " (n_layer " + std::to_string(config.n_layer) + ", d_model " + std::to_string(config.d_model) + ", n_head " +
                  std::to_string(config.n_head) + ", vocab " + std::to_string(config.vocab) + ", seq_len " +
                  std::to_string(config.seq_len) + ": " + number_text("%.0f", double(config.parameter_count())) +
                  " parameters), gradient accumulation " + std::to_string(grad_accum) + " at TP 1, compute " +
                  number_text("%.3f", compute_s * 1e3) + " ms per rank per step\n";
  std::string degrees;
  for (int t : tp_degrees) degrees += (degrees.empty() ? "" : ", ") + std::to_string(t);
  s += "tensor parallelism: TP degrees " + degrees + " (dividing the ranks, the " + std::to_string(config.n_head) +
       " heads and 4 x d_model = " + std::to_string(4 * config.d_model) +
       "); each ZeRO stage over DP = ranks / TP; TP adds per micro-batch 4L+2 all-reduces of 4NC bytes, one of "
       "8N and an all-gather of 4N x TP (N = micro-batch x seq_len), not overlapped\n";
  if (!tp_note.empty()) s += "  (" + tp_note + ")\n";
  char line[320];
  std::snprintf(line, sizeof(line), "%4s %-13s %4s %4s %12s %12s %12s %10s %10s %10s %12s  %s\n", "rank", "layout",
                "dp", "tp", "memory_GB", "resident_GB", "state_GB", "step_ms", "comm_ms", "tp_ms", "tokens/s", "verdict");
  s += line;
  int rank = 0;
  for (const auto& r : rows) {
    const std::string verdict = r.fits ? "fits" : "excluded: " + r.reason;
    std::snprintf(line, sizeof(line), "%4s %-13s %4d %4d %12.3f %12.3f %12.3f %10.3f %10.3f %10.3f %12.1f  %s\n",
                  r.fits ? std::to_string(++rank).c_str() : "-", r.layout.c_str(), r.dp, r.tp, r.memory.total() / 1e9,
                  r.resident / 1e9, r.memory.model_state / 1e9, r.predicted.step_s * 1e3, r.predicted.comm_s * 1e3, r.tp_comm_s * 1e3,
                  r.predicted.tokens_per_s, verdict.c_str());
    s += line;
  }
  if (rank == 0) s += "no layout fits the budget\n";
  return s;
}

nlohmann::json Plan::to_json() const {
  nlohmann::json rj = nlohmann::json::array();
  for (const auto& r : rows)
    rj.push_back({{"layout", r.layout},
                  {"zero_stage", r.zero_stage},
                  {"dp", r.dp},
                  {"tp", r.tp},
                  {"grad_accum", r.grad_accum},
                  {"memory_bytes", {{"total", r.memory.total()}, {"model_state", r.memory.model_state},
                                    {"gathered", r.memory.gathered}, {"communication", r.memory.communication},
                                    {"activations", r.memory.activations}, {"resident", r.resident}}},
                  {"fits", r.fits},
                  {"reason", r.reason},
                  {"collectives", collectives_json(r.collectives)},
                  {"tp_collectives", collectives_json(r.tp_collectives)},
                  {"dp_comm_s", r.dp_comm_s},
                  {"tp_comm_s", r.tp_comm_s},
                  {"predicted", r.predicted.to_json()}});
  return {{"format", "shardtrain-plan"},
          {"params", params},
          {"model_name", model_name.empty() ? nlohmann::json() : nlohmann::json(model_name)},
          {"model", config.to_json()},
          {"model_parameters", double(config.parameter_count())},
          {"grad_accum", grad_accum},
          {"compute_s", compute_s},
          {"tensor_parallelism", {{"degrees", tp_degrees},
                                  {"note", tp_note},
                                  {"rule", "TP divides the ranks, n_head and 4 x d_model (validate_tensor_parallel)"},
                                  {"collectives_per_micro_batch",
                                   "4L+2 all-reduces of 4NC bytes, one all-reduce of 8N bytes, one all-gather of 4N x TP "
                                   "bytes (N = micro_batch x seq_len, C = d_model); not overlapped"}}},
          {"layouts", rj}};
}

namespace {

// The planner's request for one layout of the plan: the trainers' (plan_training_layout) for the
// same model, ranks, batch and device, so a row fits exactly when the trainers would run it.
LayoutRequest layout_request(const PlanOptions& o, const ModelConfig& cfg, std::int64_t global, int tp, int stage) {
  LayoutRequest r;
  r.model = cfg;
  r.world = o.ranks;
  r.tp = tp;
  r.zero_stage = stage;
  r.capabilities = backend_capabilities(o.device);
  r.micro_batch = o.micro_batch;
  r.global_batch = global;
  r.deterministic = o.deterministic;
  r.memory_budget = o.memory_per_rank;
  return r;
}

// One DP rank's share of the parameters by ZeRO unit (ParameterRegistry::units(): the embeddings,
// the blocks, the final LayerNorm).
struct UnitParams {
  double total = 0, embeddings = 0, blocks = 0;
  double units = 0, block_units = 0;
  explicit UnitParams(const ParameterRegistry& registry) {
    total = double(registry.total());
    embeddings = double(registry.units().front().size());
    for (const auto& u : registry.units())
      if (u.name.rfind("h.", 0) == 0) blocks += double(u.size()), ++block_units;
    units = double(registry.units().size());
  }
};

// One DP rank's collectives of a step for a ZeRO stage (0: DDP). The embeddings unit (wte, wpe)
// is pinned (step_model.hpp): backward completes its tied wte last, so its reduction starts after
// the pass, and ZeRO's forward needs its gather before the first unit computes; the other units
// stream behind their pass.
std::vector<StepCollective> dp_collectives(int stage, const UnitParams& p, double accum) {
  const double bucket = 4.0 * 1024 * 1024;  // ddp-train's default --bucket-mb 4
  const double units = p.units;
  const double rest_bytes = 4 * (p.total - p.embeddings), emb_bytes = 4 * p.embeddings;
  const double per_unit = units > 1 ? rest_bytes / (units - 1) : 0;
  const double per_block = p.block_units > 0 ? 4 * p.blocks / p.block_units : 0;
  using Op = CollectiveOp;
  constexpr CommPhase kFwd = CommPhase::kForward, kBwd = CommPhase::kBackward;
  std::vector<StepCollective> out;
  const auto add = [&](Op op, double bytes, double calls, CommPhase phase, bool pinned) {
    if (bytes > 0 && calls > 0) out.push_back({op, bytes, calls, phase, pinned});
  };
  switch (stage) {
    case 0: {  // bucketed all-reduce of the gradients
      const double rest_calls = std::ceil(rest_bytes / bucket), emb_calls = std::ceil(emb_bytes / bucket);
      add(Op::kAllReduce, rest_bytes / std::max(1.0, rest_calls), rest_calls, kBwd, false);
      add(Op::kAllReduce, emb_bytes / std::max(1.0, emb_calls), emb_calls, kBwd, true);
      break;
    }
    // ZeRO-1 and 2 gather the updated parameters as the next forward begins (each unit's before
    // the unit computes): those gathers hide behind forward, the reduce-scatters behind backward.
    case 1:  // reduce-scatter the gradients, all-gather the updated parameters
    case 2:  // stage 2 scatters the gradients after every micro-batch
      add(Op::kReduceScatter, per_unit, (units - 1) * (stage == 2 ? accum : 1), kBwd, false);
      add(Op::kReduceScatter, emb_bytes, stage == 2 ? accum : 1, kBwd, true);
      add(Op::kAllGather, per_unit, units - 1, kFwd, false);
      add(Op::kAllGather, emb_bytes, 1, kFwd, true);
      break;
    default:  // parameters gathered for forward and the blocks again for backward, every micro-batch
      add(Op::kAllGather, per_unit, (units - 1) * accum, kFwd, false);
      add(Op::kAllGather, emb_bytes, accum, kFwd, true);
      // The embeddings (the head's wte) and the final LayerNorm stay gathered from forward to backward.
      add(Op::kAllGather, per_block, p.block_units * accum, kBwd, false);
      add(Op::kReduceScatter, per_unit, (units - 1) * accum, kBwd, false);
      add(Op::kReduceScatter, emb_bytes, accum, kBwd, true);
  }
  return out;
}

// GptModel's tensor-parallel collectives of one step (see PlanRow).
std::vector<StepCollective> tp_collectives(const ModelConfig& cfg, int micro_batch, int tp, double accum) {
  if (tp <= 1) return {};
  const double N = double(micro_batch) * cfg.seq_len, C = cfg.d_model;
  return {{CollectiveOp::kAllReduce, 4 * N * C, (4.0 * cfg.n_layer + 2) * accum},
          {CollectiveOp::kAllReduce, 8 * N, accum},
          {CollectiveOp::kAllGather, 4 * N * tp, accum}};
}



// The TP degrees the planner accepts on these ranks (DDP, no budget: the mesh alone); a device
// without tensor-parallel ops accepts TP 1 only, and the note says why.
void plan_tp_degrees(const PlanOptions& o, std::int64_t global, Plan& plan) {
  const ModelConfig& cfg = plan.config;
  std::string device_refusal;
  for (int t = 1; t <= o.ranks; ++t) {
    LayoutRequest mesh_only = layout_request(o, cfg, global, t, 0);
    mesh_only.memory_budget = 0;
    const LayoutDecision d = plan_layout(mesh_only);
    if (d.accepted()) plan.tp_degrees.push_back(t);
    else if (*d.refusal == LayoutRefusal::kTensorParallelDevice && device_refusal.empty()) device_refusal = d.message;
  }
  if (!device_refusal.empty()) {
    plan.tp_note = std::string("only TP 1 on --device ") + (o.device == DeviceKind::kCuda ? "cuda" : "cpu") + ": " +
                   device_refusal;
  } else if (plan.tp_degrees.size() == 1) {
    plan.tp_note = "no TP degree above 1 divides both the ranks and the assumed shape's " + std::to_string(cfg.n_head) +
                   " heads, so only TP 1 is planned";
  }
}

// What one layout (TP degree, ZeRO stage, and on several nodes the communication layout) fits and
// costs: the planner's verdict, the memory, the collectives of both axes and the step they give.
struct RowShape {
  int tp = 1, stage = 0;
  CommLayout comm_layout = CommLayout::kFlat;
};
PlanRow plan_row(const PlanOptions& o, const Plan& plan, const StepModel& link, std::int64_t global, const RowShape& shape) {
  static const char* const names[] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  const ModelConfig& cfg = plan.config;
  const int tp = shape.tp, stage = shape.stage, dp = o.ranks / tp, per_node = o.ranks / o.nodes;
  const int accum = int(global / (std::int64_t(o.micro_batch) * dp));
  const UnitParams params(ParameterRegistry(cfg, {tp, 0}));  // one TP rank's share
  const double tokens = double(global) * cfg.seq_len;
  PlanRow r;
  r.layout = std::string(names[stage]) + (tp > 1 ? " x TP" + std::to_string(tp) : "") +
             (o.nodes > 1 ? std::string(", ") + comm_layout_name(shape.comm_layout) : "");
  r.zero_stage = stage;
  r.dp = dp;
  r.tp = tp;
  r.grad_accum = accum;
  r.memory = estimate_memory(cfg, stage, o.ranks, o.micro_batch, accum, o.deterministic, tp, o.device);
  r.resident = r.memory.total() + process_overhead_bytes(o.device);
  const LayoutDecision d = plan_layout(layout_request(o, cfg, global, tp, stage));
  r.fits = d.accepted();
  if (!r.fits && *d.refusal == LayoutRefusal::kMemoryBudget)
    r.reason = "needs " + gb(r.resident) + " per rank (the process's resident), budget " + gb(o.memory_per_rank);
  else if (!r.fits)
    r.reason = d.message;  // a stage this device does not run
  r.collectives = dp_collectives(stage, params, accum);
  r.tp_collectives = tp_collectives(cfg, o.micro_batch, tp, accum);
  PhaseComm dp_comm;
  if (o.nodes > 1 && per_node % tp == 0) {  // the DP group spans the nodes, each TP group inside one
    const Topology dp_topology{o.nodes, per_node / tp};
    for (const auto& c : r.collectives)
      dp_comm.add(c, c.calls * collective_cost(link, c.op, c.bytes, dp_topology, shape.comm_layout).seconds);
    StepModel tp_link = link;
    if (link.intra.known()) {  // inside a node: the intra link, not the one-level link's operations
      tp_link.busbw_Bps = link.intra.busbw_Bps, tp_link.alpha_s = link.intra.alpha_s;
      tp_link.op_links.clear();
    }
    r.tp_comm_s = phase_comm(tp_link, r.tp_collectives, tp).total();
  } else {
    dp_comm = phase_comm(link, r.collectives, dp);
    r.tp_comm_s = phase_comm(link, r.tp_collectives, tp).total();
  }
  r.dp_comm_s = dp_comm.total();
  StepTerms& t = r.predicted;
  t.world = o.ranks;
  t.compute_s = plan.compute_s;
  t.comm_s = r.dp_comm_s + r.tp_comm_s;
  t.exposed_comm_s = exposed_comm_seconds(link, dp_comm, t.compute_s) + r.tp_comm_s;
  t.straggler_s = t.compute_s * link.straggler * std::log2(double(o.ranks));
  t.step_s = t.compute_s + t.exposed_comm_s + t.straggler_s;
  t.tokens_per_s = tokens / t.step_s;
  t.speedup = t.tokens_per_s / (tokens / (plan.compute_s * o.ranks));  // one rank: all the compute, no comm
  t.efficiency = t.speedup / o.ranks;
  return r;
}

}  // namespace

Plan plan_layouts(const PlanOptions& o) {
  if (o.ranks < 1) throw UsageError("--ranks must be >= 1, got " + std::to_string(o.ranks));
  if (!(o.memory_per_rank > 0)) throw UsageError("--memory-per-rank must be > 0 bytes, got " + number_text("%g", o.memory_per_rank));
  if (o.micro_batch < 1) throw UsageError("--micro-batch must be >= 1");
  if (!(o.peak_flops > 0)) throw UsageError("--peak-gflops must be > 0");
  const std::int64_t global = o.global_batch > 0 ? o.global_batch : std::int64_t(o.micro_batch) * o.ranks;
  if (global % (std::int64_t(o.micro_batch) * o.ranks) != 0)
    throw UsageError("--global-batch " + std::to_string(global) + " is not a multiple of --micro-batch x --ranks");
  Plan plan;
  if (o.shape) {
    o.shape->validate();
    plan.config = *o.shape;
    plan.model_name = o.shape_name;
    plan.params = double(plan.config.parameter_count());
  } else {
    plan.config = model_for_parameter_count(o.params, o.vocab, o.seq_len);
    plan.params = o.params;
  }
  plan.grad_accum = int(global / (std::int64_t(o.micro_batch) * o.ranks));
  const double tokens = double(global) * plan.config.seq_len;
  // Per rank per step: the model's --compute-ms when given, else 3 x forward FLOPs at the peak.
  // Tensor parallelism divides a DP rank's matrix products over its TP ranks, so the compute per
  // rank is the same for every layout of the same ranks (the replicated LayerNorms and the
  // softmax are a small share, ignored).
  plan.compute_s = o.model.compute_s > 0 ? o.model.compute_s : plan.config.flops_per_token() * tokens / o.ranks / o.peak_flops;
  plan_tp_degrees(o, global, plan);
  StepModel link = o.model;
  link.compute_s = plan.compute_s;
  // The LM head's share of each pass: its 2 V C FLOPs per token of the forward's third of the total.
  link.head_share = 6.0 * plan.config.vocab * plan.config.d_model / plan.config.flops_per_token();
  link.tokens_per_step = tokens;
  link.collectives.clear();
  link.validate();
  if (o.nodes < 1 || o.ranks % o.nodes != 0)
    throw UsageError("--nodes " + std::to_string(o.nodes) + " must divide --ranks " + std::to_string(o.ranks));
  if (o.layouts.empty()) throw UsageError("plan: no --layout");
  for (int tp : plan.tp_degrees)
    for (int stage = 0; stage <= 3; ++stage)
      for (CommLayout comm_layout : o.nodes > 1 ? o.layouts : std::vector<CommLayout>{CommLayout::kFlat})
        plan.rows.push_back(plan_row(o, plan, link, global, {tp, stage, comm_layout}));
  std::stable_sort(plan.rows.begin(), plan.rows.end(), [](const PlanRow& a, const PlanRow& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.predicted.tokens_per_s > b.predicted.tokens_per_s * (1 + 1e-12);
    return a.memory.total() < b.memory.total();
  });
  return plan;
}

}  // namespace shardtrain::scaling
