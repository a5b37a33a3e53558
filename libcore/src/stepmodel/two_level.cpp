#include "shardtrain/stepmodel/two_level.hpp"

#include <cmath>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/number_text.hpp"
#include "shardtrain/comm/hierarchical.hpp"

namespace shardtrain::scaling {
namespace {

CollectiveCost flat_cost(const StepModel& m, CollectiveOp op, double bytes, const Topology& t) {
  CollectiveCost c;
  const bool several = t.nodes > 1;
  const Link one = m.link_for(op);
  const Link& use = !several && m.intra.known() ? m.intra : one;
  c.seconds = collective_seconds(op, bytes, t.world(), use.busbw_Bps, use.alpha_s);
  (several ? c.inter_s : c.intra_s) = c.seconds;
  return c;
}

CollectiveCost hierarchical_cost(const StepModel& m, CollectiveOp op, double bytes, const Topology& t) {
  if (!m.intra.known() || !m.inter.known())
    throw UsageError("the hierarchical layout needs both links: fit on a sweep across nodes (its intra-node and "
                     "inter-node rows), or give --intra-busbw-GBps and --inter-busbw-GBps");
  const int L = t.ranks_per_node, N = t.nodes;
  if (N == 1 || L == 1 || op == CollectiveOp::kBroadcast) return flat_cost(m, op, bytes, t);
  CollectiveCost c;
  c.hierarchical = true;
  auto intra = [&](CollectiveOp o, double b) { return collective_seconds(o, b, L, m.intra.busbw_Bps, m.intra.alpha_s); };
  auto inter = [&](CollectiveOp o, double b) { return collective_seconds(o, b, N, m.inter.busbw_Bps, m.inter.alpha_s); };
  if (op == CollectiveOp::kAllReduce) {
    c.intra_s = intra(CollectiveOp::kReduceScatter, bytes) + intra(CollectiveOp::kAllGather, bytes);
    c.inter_s = inter(CollectiveOp::kAllReduce, bytes / L);
  } else {  // reduce-scatter (all-gather mirrors it): W blocks in the node, N blocks across
    c.intra_s = intra(op, bytes);
    c.inter_s = inter(op, bytes / L);
  }
  c.seconds = c.intra_s + c.inter_s;
  return c;
}

StepTerms terms_on(const StepModel& m, const Topology& t, CommLayout layout, std::vector<std::string>* choices) {
  const int w = t.world();
  StepTerms terms;
  terms.world = w;
  terms.compute_s = m.scaling == Scaling::kWeak ? m.compute_s : m.compute_s / w;
  PhaseComm comm;
  for (const auto& c : m.collectives) {
    const CollectiveCost cost = collective_cost(m, c.op, c.bytes, t, layout);
    comm.add(c, c.calls * cost.seconds);
    terms.intra_comm_s += c.calls * cost.intra_s;
    terms.inter_comm_s += c.calls * cost.inter_s;
    if (choices)
      choices->push_back(number_text("%g", c.calls) + " x " + op_name(c.op) + " of " + number_text("%.0f", c.bytes) +
                         " bytes: " + (cost.hierarchical ? "hierarchical" : "flat") + ", " +
                         number_text("%.3f", cost.intra_s * 1e3) + " ms intra + " +
                         number_text("%.3f", cost.inter_s * 1e3) + " ms inter per call");
  }
  terms.comm_s = comm.total();
  terms.exposed_comm_s = exposed_comm_seconds(m, comm, terms.compute_s);
  terms.straggler_s = terms.compute_s * m.straggler * std::log2(double(w));
  terms.step_s = terms.compute_s + terms.exposed_comm_s + terms.straggler_s;
  terms.tokens_per_s = (m.scaling == Scaling::kWeak ? w * m.tokens_per_step : m.tokens_per_step) / terms.step_s;
  return terms;
}

}  // namespace

std::string Topology::describe() const { return std::to_string(nodes) + "x" + std::to_string(ranks_per_node); }

const char* comm_layout_name(CommLayout l) {
  return l == CommLayout::kFlat ? "flat" : l == CommLayout::kHierarchical ? "hierarchical" : "auto";
}

CommLayout parse_comm_layout(const std::string& text) {
  for (CommLayout l : {CommLayout::kFlat, CommLayout::kHierarchical, CommLayout::kAuto})
    if (text == comm_layout_name(l)) return l;
  throw UsageError("--layout '" + text + "' is not one of flat, hierarchical, auto");
}

CollectiveCost collective_cost(const StepModel& m, CollectiveOp op, double bytes, const Topology& t, CommLayout layout) {
  if (t.nodes < 1 || t.ranks_per_node < 1) throw UsageError("a topology needs >= 1 node and >= 1 rank per node");
  if (layout == CommLayout::kFlat) return flat_cost(m, op, bytes, t);
  if (layout == CommLayout::kHierarchical) return hierarchical_cost(m, op, bytes, t);
  const CollectiveCost flat = flat_cost(m, op, bytes, t);
  if (t.nodes == 1 || t.ranks_per_node == 1) return flat;
  const CollectiveCost h = hierarchical_cost(m, op, bytes, t);
  return h.seconds < flat.seconds ? h : flat;
}

std::optional<std::uint64_t> hierarchical_from_bytes(const StepModel& m, CollectiveOp op, const Topology& t) {
  if (t.nodes <= 1 || t.ranks_per_node <= 1 || op == CollectiveOp::kBroadcast) return std::nullopt;
  // Each price is intercept + slope x bytes: read both lines off two sizes (2^30 bytes keeps the
  // slope's rounding far below any threshold that matters, a few bytes).
  const double big = double(1ull << 30);
  auto line = [&](CommLayout l) {
    const double at0 = collective_cost(m, op, 0, t, l).seconds;
    return std::make_pair(at0, (collective_cost(m, op, big, t, l).seconds - at0) / big);
  };
  const auto [flat0, flat_slope] = line(CommLayout::kFlat);
  const auto [hier0, hier_slope] = line(CommLayout::kHierarchical);
  if (hier_slope >= flat_slope) return hier0 < flat0 && hier_slope == flat_slope ? std::optional<std::uint64_t>(0)
                                                                                : std::nullopt;
  const double cross = (hier0 - flat0) / (flat_slope - hier_slope);  // where the lines meet
  if (cross < 0) return 0;
  if (cross >= 0x1p62) return std::nullopt;  // beyond any buffer: never, in effect
  // Past the meeting point hierarchical is cheaper; the first whole byte beyond it.
  return std::uint64_t(std::floor(cross)) + 1;
}

std::array<std::uint64_t, kNumCollectiveOps> hierarchical_thresholds(const StepModel& m, const Topology& t) {
  std::array<std::uint64_t, kNumCollectiveOps> from;
  from.fill(kNeverHierarchical);
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather})
    if (auto b = hierarchical_from_bytes(m, op, t)) from[static_cast<int>(op)] = *b;
  return from;
}

StepTerms predict_on(const StepModel& model, const Topology& t, CommLayout layout, std::vector<std::string>* choices) {
  model.validate();
  StepTerms terms = terms_on(model, t, layout, choices);
  const StepTerms one = terms_on(model, {1, 1}, CommLayout::kFlat, nullptr);
  terms.speedup = terms.tokens_per_s / one.tokens_per_s;
  terms.efficiency = terms.speedup / terms.world;
  return terms;
}

}  // namespace shardtrain::scaling
