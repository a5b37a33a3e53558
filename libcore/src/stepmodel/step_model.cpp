#include "shardtrain/stepmodel/step_model.hpp"

#include <algorithm>
#include <cmath>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/number_text.hpp"

namespace shardtrain::scaling {
namespace {

StepTerms terms_at(const StepModel& m, int w) {
  StepTerms t;
  t.world = w;
  t.compute_s = m.scaling == Scaling::kWeak ? m.compute_s : m.compute_s / w;
  const PhaseComm comm = phase_comm(m, m.collectives, w);
  t.comm_s = comm.total();
  t.exposed_comm_s = exposed_comm_seconds(m, comm, t.compute_s);
  t.straggler_s = t.compute_s * m.straggler * std::log2(double(w));
  t.step_s = t.compute_s + t.exposed_comm_s + t.straggler_s;
  const double tokens = m.scaling == Scaling::kWeak ? w * m.tokens_per_step : m.tokens_per_step;
  t.tokens_per_s = tokens / t.step_s;
  return t;
}

}  // namespace

const char* scaling_name(Scaling s) { return s == Scaling::kWeak ? "weak" : "strong"; }

Link StepModel::link_for(CollectiveOp op) const {
  const auto it = op_links.find(op == CollectiveOp::kAllReduceCanonical ? CollectiveOp::kAllReduce : op);
  return it != op_links.end() ? it->second : Link{busbw_Bps, alpha_s};
}

const char* comm_phase_name(CommPhase p) { return p == CommPhase::kForward ? "forward" : "backward"; }

PhaseComm phase_comm(const StepModel& m, const std::vector<StepCollective>& collectives, int world) {
  PhaseComm comm;
  for (const auto& c : collectives) {
    const Link link = m.link_for(c.op);
    comm.add(c, c.calls * collective_seconds(c.op, c.bytes, world, link.busbw_Bps, link.alpha_s));
  }
  return comm;
}

double exposed_comm_seconds(const StepModel& m, const PhaseComm& comm, double compute_s) {
  const double floor_share = (1 - m.overlap) * comm.total();
  const double open = (1 - m.head_share) * compute_s;  // of each pass, the part a streamed call can overlap
  const double outlasting = comm.forward_pinned_s + std::max(0.0, comm.forward_s - m.forward_share * open) +
                            comm.backward_pinned_s + std::max(0.0, comm.backward_s - m.backward_share * open);
  return std::max(floor_share, outlasting);
}

bool is_modelled_op(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllReduceCanonical ||
         op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather || op == CollectiveOp::kBroadcast;
}

nlohmann::json collectives_json(const std::vector<StepCollective>& cs) { return json_fields::write_value(cs); }

CollectiveOp OpNameCodec::read(const JsonFile& f, const std::string& pointer) const {
  const std::string name = f.string(pointer);
  const std::optional<CollectiveOp> op = op_named(name);
  if (!op) f.fail("field " + pointer + " is not a collective operation (got '" + name + "')");
  return *op;
}

std::map<CollectiveOp, Link> PerOpLinksCodec::read(const JsonFile& f, const std::string& pointer) const {
  json_fields::require_object(f, pointer);
  std::map<CollectiveOp, Link> links;
  for (const auto& item : f.at(pointer).items()) {
    const std::string at = json_fields::field(pointer, item.key());
    const auto op = op_named(item.key());
    if (!op || !is_modelled_op(*op)) f.fail("field " + at + ": '" + item.key() + "' is not a modelled operation");
    links[*op] = json_fields::read<Link>(f, at);
  }
  return links;
}

nlohmann::json PerOpLinksCodec::write(const std::map<CollectiveOp, Link>& links) const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [op, link] : links) j[op_name(op)] = json_fields::write(link);
  return j;
}

void StepModel::validate() const {
  auto bad = [](const std::string& field, const std::string& need, double v) {
    throw UsageError("model: " + field + " must be " + need + ", got " + number_text("%g", v));
  };
  if (!(compute_s > 0) || !std::isfinite(compute_s))
    bad("compute_s (--compute-ms, or fit with --runs)", "> 0", compute_s);
  if (!(tokens_per_step > 0) || !std::isfinite(tokens_per_step)) bad("tokens_per_step", "> 0", tokens_per_step);
  if (!(busbw_Bps > 0) || !std::isfinite(busbw_Bps)) bad("busbw_Bps (--busbw-GBps)", "> 0", busbw_Bps);
  if (!(alpha_s >= 0) || !std::isfinite(alpha_s)) bad("alpha_s (--alpha-us)", ">= 0", alpha_s);
  if (!(overlap >= 0 && overlap <= 1)) bad("overlap", "in [0, 1]", overlap);
  if (!(straggler >= 0) || !std::isfinite(straggler)) bad("straggler", ">= 0", straggler);
  if (!(forward_share >= 0 && forward_share <= 1)) bad("forward_share", "in [0, 1]", forward_share);
  if (!(backward_share >= 0 && backward_share <= 1 - forward_share))
    bad("backward_share", "in [0, 1 - forward_share]", backward_share);
  if (!(head_share >= 0 && head_share < 1)) bad("head_share", "in [0, 1)", head_share);
  for (const auto& [op, link] : op_links) {
    if (!(link.busbw_Bps > 0) || !std::isfinite(link.busbw_Bps)) bad(std::string("per_op ") + op_name(op) + " busbw_Bps", "> 0", link.busbw_Bps);
    if (!(link.alpha_s >= 0) || !std::isfinite(link.alpha_s)) bad(std::string("per_op ") + op_name(op) + " alpha_s", ">= 0", link.alpha_s);
  }
  for (const auto& c : collectives) {
    if (!is_modelled_op(c.op)) throw UsageError(std::string("model: collective ") + op_name(c.op) + " is not modelled");
    if (!(c.bytes >= 0) || !(c.calls >= 0)) throw UsageError(std::string("model: collective ") + op_name(c.op) +
                                                             " needs bytes >= 0 and calls >= 0");
  }
}

StepModel StepModel::from_json(const nlohmann::json& j, const std::string& source) {
  return json_fields::read<StepModel>(JsonFile::parse(j.dump(), source, "the step model"), "");
}

StepModel read_step_model(const std::string& path, const std::string& what) {
  return json_fields::read<StepModel>(JsonFile::read(path, what), "");
}

double ring_steps(CollectiveOp op, int world) {
  if (world <= 1) return 0;
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllReduceCanonical ? 2.0 * (world - 1) : world - 1.0;
}

double collective_seconds(CollectiveOp op, double bytes, int world, double busbw_Bps, double alpha_s) {
  if (world <= 1) return 0;
  return bus_bandwidth_factor(op, world) * bytes / busbw_Bps + ring_steps(op, world) * alpha_s;
}

nlohmann::json StepTerms::to_json() const {
  nlohmann::json j = {{"workers", world},          {"step_s", step_s},         {"compute_s", compute_s},
                      {"comm_s", comm_s},          {"exposed_comm_s", exposed_comm_s}, {"straggler_s", straggler_s},
                      {"tokens_per_s", tokens_per_s}, {"speedup", speedup},    {"efficiency", efficiency}};
  if (intra_comm_s > 0 || inter_comm_s > 0) j["intra_comm_s"] = intra_comm_s, j["inter_comm_s"] = inter_comm_s;
  return j;
}

StepTerms predict(const StepModel& model, int world) {
  model.validate();
  if (world < 1) throw UsageError("workers must be >= 1, got " + std::to_string(world));
  StepTerms t = terms_at(model, world);
  const StepTerms one = terms_at(model, 1);
  t.speedup = t.tokens_per_s / one.tokens_per_s;
  t.efficiency = t.speedup / world;
  return t;
}

}  // namespace shardtrain::scaling
