#include "shardtrain/scaling/step_model.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/backend/capabilities.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/parallel/layout_plan.hpp"
#include "shardtrain/train/run_summary.hpp"

namespace shardtrain::scaling {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string gb(double bytes) { return fmt("%.2f GB", bytes / 1e9); }

bool op_from_name(const std::string& name, CollectiveOp* op) {
  for (int i = 0; i < kNumCollectiveOps; ++i)
    if (name == op_name(CollectiveOp(i))) {
      *op = CollectiveOp(i);
      return true;
    }
  return false;
}

bool is_payload_op(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllReduceCanonical ||
         op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather || op == CollectiveOp::kBroadcast;
}

// Ring steps of one call: the latency term's multiplier.
double ring_steps(CollectiveOp op, int world) {
  if (world <= 1) return 0;
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kAllReduceCanonical ? 2.0 * (world - 1) : world - 1.0;
}

nlohmann::json read_json(const std::string& path, const std::string& what) {
  return JsonFile::read(path, "the " + what + " file").json();
}

double number(const nlohmann::json& j, const char* field, const std::string& where) {
  if (!j.is_object() || !j.contains(field)) throw UsageError(where + ": missing field '" + field + "'");
  if (!j.at(field).is_number()) throw UsageError(where + ": field '" + field + "' must be a number, got " + j.at(field).dump());
  const double v = j.at(field).get<double>();
  if (!std::isfinite(v)) throw UsageError(where + ": field '" + field + "' is not finite");
  return v;
}

// Least squares of A x ~ b for two unknowns (normal equations); false when singular.
bool solve2(const std::vector<std::array<double, 2>>& A, const std::vector<double>& b, double x[2]) {
  double m00 = 0, m01 = 0, m11 = 0, r0 = 0, r1 = 0;
  for (std::size_t i = 0; i < A.size(); ++i) {
    m00 += A[i][0] * A[i][0];
    m01 += A[i][0] * A[i][1];
    m11 += A[i][1] * A[i][1];
    r0 += A[i][0] * b[i];
    r1 += A[i][1] * b[i];
  }
  const double det = m00 * m11 - m01 * m01;
  if (!(std::fabs(det) > 1e-12 * (m00 * m11 + 1e-300))) return false;
  x[0] = (r0 * m11 - r1 * m01) / det;
  x[1] = (m00 * r1 - m01 * r0) / det;
  return true;
}

// One unknown: x minimising sum (a_i x - b_i)^2.
double solve1(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num += a[i] * b[i], den += a[i] * a[i];
  return den > 0 ? num / den : 0.0;
}

nlohmann::json collectives_json(const std::vector<StepCollective>& cs) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& c : cs) a.push_back({{"op", op_name(c.op)}, {"bytes", c.bytes}, {"calls", c.calls}});
  return a;
}

}  // namespace

const char* scaling_name(Scaling s) { return s == Scaling::kWeak ? "weak" : "strong"; }

// ---------------------------------------------------------------- the model -----------------------

void StepModel::validate() const {
  auto bad = [](const std::string& field, const std::string& need, double v) {
    throw UsageError("model: " + field + " must be " + need + ", got " + fmt("%g", v));
  };
  if (!(compute_s > 0) || !std::isfinite(compute_s))
    bad("compute_s (--compute-ms, or fit with --runs)", "> 0", compute_s);
  if (!(tokens_per_step > 0) || !std::isfinite(tokens_per_step)) bad("tokens_per_step", "> 0", tokens_per_step);
  if (!(busbw_Bps > 0) || !std::isfinite(busbw_Bps)) bad("busbw_Bps (--busbw-GBps)", "> 0", busbw_Bps);
  if (!(alpha_s >= 0) || !std::isfinite(alpha_s)) bad("alpha_s (--alpha-us)", ">= 0", alpha_s);
  if (!(overlap >= 0 && overlap <= 1)) bad("overlap", "in [0, 1]", overlap);
  if (!(straggler >= 0) || !std::isfinite(straggler)) bad("straggler", ">= 0", straggler);
  for (const auto& c : collectives) {
    if (!is_payload_op(c.op)) throw UsageError(std::string("model: collective ") + op_name(c.op) + " is not modelled");
    if (!(c.bytes >= 0) || !(c.calls >= 0)) throw UsageError(std::string("model: collective ") + op_name(c.op) +
                                                             " needs bytes >= 0 and calls >= 0");
  }
}

nlohmann::json StepModel::to_json() const {
  nlohmann::json j = {{"format", "shardtrain-scaling-model"},
          {"version", 1},
          {"units", "seconds, bytes, bytes per second"},
          {"compute_s", compute_s},
          {"scaling", scaling_name(scaling)},
          {"tokens_per_step", tokens_per_step},
          {"collectives", collectives_json(collectives)},
          {"busbw_Bps", busbw_Bps},
          {"alpha_s", alpha_s},
          {"overlap", overlap},
          {"straggler", straggler},
          {"inputs", inputs}};
  if (intra.known()) j["intra_node"] = {{"busbw_Bps", intra.busbw_Bps}, {"alpha_s", intra.alpha_s}};
  if (inter.known()) j["inter_node"] = {{"busbw_Bps", inter.busbw_Bps}, {"alpha_s", inter.alpha_s}};
  return j;
}

StepModel StepModel::from_json(const nlohmann::json& j, const std::string& source) {
  const std::string where = "model '" + source + "'";
  if (!j.is_object() || j.find("format") == j.end() || *j.find("format") != "shardtrain-scaling-model")
    throw UsageError(where + ": not a scaling model (\"format\": \"shardtrain-scaling-model\" expected)");
  StepModel m;
  m.compute_s = number(j, "compute_s", where);
  const std::string s = j.contains("scaling") && j.at("scaling").is_string() ? j.at("scaling").get<std::string>() : "";
  if (s != "weak" && s != "strong") throw UsageError(where + ": field 'scaling' must be \"weak\" or \"strong\"");
  m.scaling = s == "weak" ? Scaling::kWeak : Scaling::kStrong;
  m.tokens_per_step = number(j, "tokens_per_step", where);
  m.busbw_Bps = number(j, "busbw_Bps", where);
  m.alpha_s = number(j, "alpha_s", where);
  m.overlap = number(j, "overlap", where);
  m.straggler = number(j, "straggler", where);
  if (!j.contains("collectives") || !j["collectives"].is_array())
    throw UsageError(where + ": missing array 'collectives'");
  for (const auto& c : j["collectives"]) {
    StepCollective sc;
    if (!c.is_object() || !c.contains("op") || !c["op"].is_string() || !op_from_name(c["op"].get<std::string>(), &sc.op))
      throw UsageError(where + ": a collective has no known 'op'");
    sc.bytes = number(c, "bytes", where + " collective");
    sc.calls = number(c, "calls", where + " collective");
    m.collectives.push_back(sc);
  }
  if (j.contains("inputs")) m.inputs = j["inputs"];
  for (auto [field, link] : {std::pair{"intra_node", &m.intra}, std::pair{"inter_node", &m.inter}}) {
    if (!j.contains(field)) continue;
    link->busbw_Bps = number(j[field], "busbw_Bps", where + " " + field);
    link->alpha_s = number(j[field], "alpha_s", where + " " + field);
  }
  return m;
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

namespace {
StepTerms terms_at(const StepModel& m, int w) {
  StepTerms t;
  t.world = w;
  t.compute_s = m.scaling == Scaling::kWeak ? m.compute_s : m.compute_s / w;
  for (const auto& c : m.collectives) t.comm_s += c.calls * collective_seconds(c.op, c.bytes, w, m.busbw_Bps, m.alpha_s);
  t.exposed_comm_s = (1 - m.overlap) * t.comm_s;
  t.straggler_s = t.compute_s * m.straggler * std::log2(double(w));
  t.step_s = t.compute_s + t.exposed_comm_s + t.straggler_s;
  const double tokens = m.scaling == Scaling::kWeak ? w * m.tokens_per_step : m.tokens_per_step;
  t.tokens_per_s = tokens / t.step_s;
  return t;
}
}  // namespace

StepTerms predict(const StepModel& model, int world) {
  model.validate();
  if (world < 1) throw UsageError("workers must be >= 1, got " + std::to_string(world));
  StepTerms t = terms_at(model, world);
  const StepTerms one = terms_at(model, 1);
  t.speedup = t.tokens_per_s / one.tokens_per_s;
  t.efficiency = t.speedup / world;
  return t;
}

// ---------------------------------------------------------------- two levels ----------------------

std::string Topology::describe() const { return std::to_string(nodes) + "x" + std::to_string(ranks_per_node); }

std::vector<Topology> parse_topologies(const std::string& text, const std::string& what) {
  std::vector<Topology> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::size_t x = item.find('x');
    std::vector<int> n;
    if (x != std::string::npos) n = parse_workers(item.substr(0, x) + "," + item.substr(x + 1), what);
    if (n.size() != 2) throw UsageError(what + ": '" + item + "' is not NODESxRANKS_PER_NODE (e.g. 2x2)");
    out.push_back({n[0], n[1]});
  }
  if (out.empty()) throw UsageError(what + ": no topology given (e.g. 2x2,3x1)");
  return out;
}

const char* comm_layout_name(CommLayout l) {
  return l == CommLayout::kFlat ? "flat" : l == CommLayout::kHierarchical ? "hierarchical" : "auto";
}

CommLayout parse_comm_layout(const std::string& text) {
  for (CommLayout l : {CommLayout::kFlat, CommLayout::kHierarchical, CommLayout::kAuto})
    if (text == comm_layout_name(l)) return l;
  throw UsageError("--layout '" + text + "' is not one of flat, hierarchical, auto");
}

namespace {
CollectiveCost flat_cost(const StepModel& m, CollectiveOp op, double bytes, const Topology& t) {
  CollectiveCost c;
  const bool several = t.nodes > 1;
  const Link one{m.busbw_Bps, m.alpha_s};
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
}  // namespace

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

namespace {
StepTerms terms_on(const StepModel& m, const Topology& t, CommLayout layout, std::vector<std::string>* choices) {
  const int w = t.world();
  StepTerms terms;
  terms.world = w;
  terms.compute_s = m.scaling == Scaling::kWeak ? m.compute_s : m.compute_s / w;
  for (const auto& c : m.collectives) {
    const CollectiveCost cost = collective_cost(m, c.op, c.bytes, t, layout);
    terms.comm_s += c.calls * cost.seconds;
    terms.intra_comm_s += c.calls * cost.intra_s;
    terms.inter_comm_s += c.calls * cost.inter_s;
    if (choices)
      choices->push_back(fmt("%g", c.calls) + " x " + op_name(c.op) + " of " + fmt("%.0f", c.bytes) + " bytes: " +
                         (cost.hierarchical ? "hierarchical" : "flat") + ", " + fmt("%.3f", cost.intra_s * 1e3) +
                         " ms intra + " + fmt("%.3f", cost.inter_s * 1e3) + " ms inter per call");
  }
  terms.exposed_comm_s = (1 - m.overlap) * terms.comm_s;
  terms.straggler_s = terms.compute_s * m.straggler * std::log2(double(w));
  terms.step_s = terms.compute_s + terms.exposed_comm_s + terms.straggler_s;
  terms.tokens_per_s = (m.scaling == Scaling::kWeak ? w * m.tokens_per_step : m.tokens_per_step) / terms.step_s;
  return terms;
}
}  // namespace

StepTerms predict_on(const StepModel& model, const Topology& t, CommLayout layout, std::vector<std::string>* choices) {
  model.validate();
  StepTerms terms = terms_on(model, t, layout, choices);
  const StepTerms one = terms_on(model, {1, 1}, CommLayout::kFlat, nullptr);
  terms.speedup = terms.tokens_per_s / one.tokens_per_s;
  terms.efficiency = terms.speedup / terms.world;
  return terms;
}

std::string topology_prediction_table(const StepModel& m, const std::vector<Topology>& topologies,
                                      const std::vector<CommLayout>& layouts) {
  m.validate();
  auto link = [](const char* name, const Link& l) {
    return std::string(name) + (l.known() ? " busbw " + fmt("%.3f", l.busbw_Bps / 1e9) + " GB/s, alpha " +
                                                fmt("%.2f", l.alpha_s * 1e6) + " us"
                                          : " unknown");
  };
  std::string s = "links: " + link("intra-node", m.intra) + "; " + link("inter-node", m.inter) + "; one-level busbw " +
                  fmt("%.3f", m.busbw_Bps / 1e9) + " GB/s, alpha " + fmt("%.2f", m.alpha_s * 1e6) + " us\n";
  char line[256];
  std::snprintf(line, sizeof line, "%9s %13s %10s %10s %10s %10s %8s %7s %12s\n", "topology", "layout", "step_ms", "comm",
                "intra", "inter", "speedup", "E", "tokens/s");
  s += line;
  std::string details;
  for (const auto& t : topologies)
    for (CommLayout l : layouts) {
      std::vector<std::string> choices;
      const StepTerms r = predict_on(m, t, l, &choices);
      std::snprintf(line, sizeof line, "%9s %13s %10.3f %10.3f %10.3f %10.3f %8.3f %7.3f %12.1f\n", t.describe().c_str(),
                    comm_layout_name(l), r.step_s * 1e3, r.comm_s * 1e3, r.intra_comm_s * 1e3, r.inter_comm_s * 1e3,
                    r.speedup, r.efficiency, r.tokens_per_s);
      s += line;
      for (const auto& c : choices) details += "  " + t.describe() + " " + comm_layout_name(l) + ": " + c + "\n";
    }
  return s + "per collective (one call):\n" + details;
}

nlohmann::json topology_prediction_json(const StepModel& m, const std::vector<Topology>& topologies,
                                        const std::vector<CommLayout>& layouts) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : topologies)
    for (CommLayout l : layouts) {
      std::vector<std::string> choices;
      nlohmann::json row = predict_on(m, t, l, &choices).to_json();
      row["topology"] = {{"nodes", t.nodes}, {"ranks_per_node", t.ranks_per_node}};
      row["layout"] = comm_layout_name(l);
      row["collectives"] = choices;
      rows.push_back(std::move(row));
    }
  return {{"format", "shardtrain-scaling-prediction"}, {"model", m.to_json()}, {"rows", rows}};
}

std::vector<int> parse_workers(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw UsageError(what + " '" + text + "': '" + item + "' is not a whole number");
    if (v < 1 || v > 1 << 20) throw UsageError(what + " '" + text + "': " + item + " workers is not in [1, 1048576]");
    out.push_back(int(v));
  }
  if (out.empty()) throw UsageError(what + " is empty: give worker counts such as 1,2,4,8");
  return out;
}

double parse_bytes(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError(what + " '" + text + "' is not a byte count (e.g. 8e9, 8GB, 80GiB)");
  }
  std::string unit = text.substr(used);
  static const std::map<std::string, double> units = {
      {"", 1},      {"B", 1},          {"K", 1e3},  {"KB", 1e3},          {"M", 1e6},  {"MB", 1e6},
      {"G", 1e9},   {"GB", 1e9},       {"T", 1e12}, {"TB", 1e12},         {"KiB", 1024.0},
      {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const auto it = units.find(unit);
  if (it == units.end()) throw UsageError(what + " '" + text + "': unknown unit '" + unit + "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  v *= it->second;
  if (!(v > 0) || !std::isfinite(v)) throw UsageError(what + " '" + text + "' must be a positive number of bytes");
  return v;
}

std::string prediction_table(const StepModel& m, const std::vector<int>& workers) {
  m.validate();
  std::string s = "model: " + std::string(scaling_name(m.scaling)) + " scaling, compute " +
                  fmt("%.3f", m.compute_s * 1e3) + " ms per step at W=1, " + fmt("%g", m.tokens_per_step) +
                  " tokens per step at W=1\n";
  s += "       busbw " + fmt("%.3f", m.busbw_Bps / 1e9) + " GB/s, alpha " + fmt("%.2f", m.alpha_s * 1e6) +
       " us per ring step, overlap " + fmt("%.2f", m.overlap) + ", straggler s " + fmt("%.4f", m.straggler) + "\n";
  for (const auto& c : m.collectives)
    s += std::string("       per step: ") + fmt("%g", c.calls) + " x " + op_name(c.op) + " of " +
         fmt("%.0f", c.bytes) + " bytes\n";
  s += "T(W) = compute + (1 - overlap) x comm + compute x s x log2 W (times in ms)\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%6s %10s %8s %7s %10s %10s %10s %10s %12s\n", "W", "step_ms", "speedup", "E",
                "compute", "comm", "exposed", "straggler", "tokens/s");
  s += line;
  for (int w : workers) {
    const StepTerms t = predict(m, w);
    std::snprintf(line, sizeof(line), "%6d %10.3f %8.3f %7.3f %10.3f %10.3f %10.3f %10.3f %12.1f\n", w,
                  t.step_s * 1e3, t.speedup, t.efficiency, t.compute_s * 1e3, t.comm_s * 1e3, t.exposed_comm_s * 1e3,
                  t.straggler_s * 1e3, t.tokens_per_s);
    s += line;
  }
  return s;
}

nlohmann::json prediction_json(const StepModel& m, const std::vector<int>& workers) {
  nlohmann::json rows = nlohmann::json::array();
  for (int w : workers) rows.push_back(predict(m, w).to_json());
  return {{"format", "shardtrain-scaling-prediction"}, {"model", m.to_json()}, {"rows", rows}};
}

// The seed's lab publishes only its result (1.0/1.9/3.7/7.0/13.2x at 1/2/4/8/16 workers), its
// 120 ms of local compute per step (weak scaling: every worker keeps its batch) and the shape of
// its model (ring all-reduce, a straggler penalty growing with log2 W). Dividing out, the step
// at W is W / S(W) times the one-worker step: 1.053, 1.081, 1.143, 1.212 at W = 2, 4, 8, 16. The
// penalty grows about linearly in W at large W, which only the ring's 2(W-1) x alpha term can
// give: without alpha (bandwidth + straggler only) the best fit misses by 1.5% (13.39x at 16);
// without the straggler the best misses by 0.59%. With round hardware numbers:
//   gradients 32 MiB in 16 buckets of 2 MiB (an 8.4M-parameter fp32 model), one all-reduce per
//   bucket per step: 2(W-1)/W x 3.36 ms of bandwidth at busbw 10 GB/s (a 100 Gb/s link);
//   alpha 30 us per ring step (a socket transport over Ethernet): 16 x 2(W-1) x 30 us;
//   s = 0.0107: the slowest of W workers is 1.07% of the compute slower per doubling of W
//   (the minimax choice for these hardware numbers), no overlap (the lab overlaps nothing);
// the speedups are 1.000/1.911/3.679/7.036/13.166x, at most 0.58% from the lab's (W = 2).
// The fit is unique to the extent the four speedups (two significant figures each) allow: they
// fix the sums 16 x alpha and bytes/busbw only to within about 10%, so this is one physically
// sensible point of a small family, not a measurement of the lab's hardware.
StepModel seed_lab_model() {
  StepModel m;
  m.compute_s = 0.120;
  m.scaling = Scaling::kWeak;
  m.tokens_per_step = 8192;  // any value: speedup and E do not depend on it
  m.collectives = {{CollectiveOp::kAllReduce, 2.0 * 1024 * 1024, 16}};
  m.busbw_Bps = 10e9;
  m.alpha_s = 30e-6;
  m.overlap = 0;
  m.straggler = 0.0107;
  m.inputs = {{"example", "seed-lab"},
              {"source", "the seed's all-reduce scaling lab: 120 ms local compute, ring all-reduce, "
                         "logarithmic straggler penalty; speedups 1.0/1.9/3.7/7.0/13.2x at 1/2/4/8/16"}};
  return m;
}

std::vector<std::pair<int, double>> seed_lab_speedups() { return {{1, 1.0}, {2, 1.9}, {4, 3.7}, {8, 7.0}, {16, 13.2}}; }

StepModel read_step_model(const std::string& path, const std::string& what) {
  return StepModel::from_json(JsonFile::read(path, what).json(), path);
}

// ---------------------------------------------------------------- fit -----------------------------

std::vector<CollectiveSample> read_collectives(const std::string& path, const std::string& impl, std::string* impl_used) {
  const std::string where = "--collectives '" + path + "'";
  const nlohmann::json j = read_json(path, "--collectives");
  if (!j.is_object() || j.find("format") == j.end() || *j.find("format") != "shardtrain-collectives")
    throw UsageError(where + ": not a collectives sweep (\"format\": \"shardtrain-collectives\" expected)");
  if (!j.contains("rows") || !j["rows"].is_array()) throw UsageError(where + ": missing array 'rows'");
  std::set<std::string> impls;
  for (const auto& r : j["rows"]) {
    if (!r.is_object() || !r.contains("impl") || !r["impl"].is_string())
      throw UsageError(where + ": a row has no string 'impl'");
    impls.insert(r["impl"].get<std::string>());
  }
  std::string chosen = impl;
  if (chosen.empty()) chosen = impls.count("communicator-fast") || impls.size() != 1 ? "communicator-fast" : *impls.begin();
  if (!impls.count(chosen)) {
    std::string have;
    for (const auto& i : impls) have += (have.empty() ? "" : ", ") + i;
    throw UsageError(where + ": no rows of impl '" + chosen + "' (the file has: " + (have.empty() ? "none" : have) + ")");
  }
  std::vector<CollectiveSample> out;
  for (const auto& r : j["rows"]) {
    if (r["impl"].get<std::string>() != chosen) continue;
    CollectiveSample s;
    if (!r.contains("op") || !r["op"].is_string() || !op_from_name(r["op"].get<std::string>(), &s.op) ||
        !is_payload_op(s.op))
      throw UsageError(where + ": a row's 'op' is not AllReduce, ReduceScatter, AllGather or Broadcast");
    const double ranks = number(r, "ranks", where + " row");
    if (ranks != std::floor(ranks) || ranks < 0 || ranks > 1e7)
      throw UsageError(where + ": a row's 'ranks' is not a whole number of ranks in [0, 1e7]");  // int(1e30) is undefined
    s.ranks = int(ranks);
    s.bytes = number(r, "bytes", where + " row");
    s.time_s = number(r, "time_s", where + " row");
    const double wrong = r.contains("wrong") ? number(r, "wrong", where + " row") : 0.0;
    if (wrong != 0 || s.ranks < 2 || !(s.bytes > 0)) continue;
    if (!(s.time_s > 0)) throw UsageError(where + ": a row has time_s <= 0");
    out.push_back(s);
  }
  if (out.size() < 2) throw UsageError(where + ": fewer than two usable rows (ranks >= 2, bytes > 0, wrong 0) of impl '" + chosen + "'");
  if (impl_used) *impl_used = chosen;
  return out;
}

LinkFit fit_link(const std::vector<CollectiveSample>& rows) {
  // t = (f bytes) x (1 / busbw) + k x alpha; every row divided by t (relative residuals).
  std::vector<std::array<double, 2>> A;
  std::vector<double> b;
  for (const auto& r : rows) {
    A.push_back({bus_bandwidth_factor(r.op, r.ranks) * r.bytes / r.time_s, ring_steps(r.op, r.ranks) / r.time_s});
    b.push_back(1.0);
  }
  double x[2] = {0, 0};
  if (!solve2(A, b, x) || x[1] < 0) {  // no latency visible: bandwidth alone
    std::vector<double> a0;
    for (const auto& a : A) a0.push_back(a[0]);
    x[0] = solve1(a0, b);
    x[1] = 0;
  }
  if (!(x[0] > 0)) throw UsageError("fit: the collectives sweep gives no positive bandwidth (times do not grow with bytes)");
  LinkFit f;
  f.busbw_Bps = 1.0 / x[0];
  f.alpha_s = x[1];
  f.rows = int(rows.size());
  double ss = 0;
  for (const auto& r : rows) {
    const double e = (collective_seconds(r.op, r.bytes, r.ranks, f.busbw_Bps, f.alpha_s) - r.time_s) / r.time_s;
    ss += e * e;
  }
  f.rms_relative_residual = std::sqrt(ss / rows.size());
  return f;
}

RunSample run_sample_of(const RunSummary& summary, const std::string& path) {
  const std::string where = "--runs '" + path + "'";
  RunSample r;
  r.path = path;
  r.world = summary.world_size;
  r.step_s = summary.median_step_s;
  r.tokens_per_step = summary.throughput_tokens_per_s * r.step_s;
  const double steps = double(summary.steps);
  if (r.world < 1 || !(r.step_s > 0) || !(r.tokens_per_step > 0) || !(steps > 0))
    throw UsageError(where + ": world_size, median_step_s, throughput_tokens_per_s and steps must be positive");
  const auto median_of = [&](const char* column) {
    const auto it = summary.per_rank_medians.columns.find(column);
    return it == summary.per_rank_medians.columns.end() ? 0.0 : it->second.stats.median;
  };
  r.comm_total_s = median_of("comm_total_s");
  r.comm_exposed_s = median_of("comm_exposed_s");
  // "communication" is CommStats' JSON (comm/stats.hpp), an object (RunSummary::from_json checks).
  for (const auto& [name, stats] : summary.communication.items()) {
    CollectiveOp op;
    // Broadcast, Barrier and Split are start-up and control traffic, not the step's.
    if (!stats.is_object() || !op_from_name(name, &op) || !is_payload_op(op) || op == CollectiveOp::kBroadcast) continue;
    const double calls = number(stats, "calls", where + " communication." + name);
    const double bytes = number(stats, "bytes", where + " communication." + name);
    // Fewer calls than steps: end-of-run traffic (the summary's own gathers), not the step's.
    if (calls >= steps && bytes > 0) r.collectives.push_back({op, bytes / calls, calls / steps});
  }
  return r;
}

RunSample read_run(const std::string& run_dir) {
  const std::string path = run_dir.size() > 5 && run_dir.substr(run_dir.size() - 5) == ".json" ? run_dir
                                                                                                 : run_dir + "/summary.json";
  return run_sample_of(read_run_summary(path, "the --runs run summary"), path);
}

ComputeFit fit_compute(const std::vector<RunSample>& runs, const LinkFit& link, Scaling scaling, double overlap) {
  if (runs.empty()) throw UsageError("fit: no runs to fit the compute time to");
  std::vector<std::array<double, 2>> A;
  std::vector<double> b, a0;
  std::set<int> worlds;
  for (const auto& r : runs) {
    double comm = 0;
    for (const auto& c : r.collectives) comm += c.calls * collective_seconds(c.op, c.bytes, r.world, link.busbw_Bps, link.alpha_s);
    const double g = scaling == Scaling::kWeak ? 1.0 : 1.0 / r.world;
    const double y = r.step_s - (1 - overlap) * comm;  // = c0 g (1 + s log2 W)
    A.push_back({g / r.step_s, g * std::log2(double(r.world)) / r.step_s});
    a0.push_back(g / r.step_s);
    b.push_back(y / r.step_s);
    worlds.insert(r.world);
  }
  ComputeFit f;
  double x[2] = {0, 0};
  if (worlds.size() >= 2 && solve2(A, b, x) && x[1] >= 0) {
    f.compute_s = x[0];
    f.straggler = x[0] > 0 ? x[1] / x[0] : 0;
    f.straggler_fitted = true;
  } else {
    f.compute_s = solve1(a0, b);
    f.straggler = 0;
    f.straggler_fitted = worlds.size() >= 2;  // fitted, and negative: clamped to 0
  }
  if (!(f.compute_s > 0))
    throw UsageError("fit: the runs' step times are below the modelled communication (compute would be <= 0); "
                     "check that the collectives sweep matches the runs' machine");
  double ss = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const double pred = f.compute_s * (A[i][0] + f.straggler * A[i][1]) - b[i];  // relative residual
    ss += pred * pred;
  }
  f.rms_relative_residual = std::sqrt(ss / runs.size());
  return f;
}

StepModel fit_model(const FitOptions& o) {
  if (o.collectives_path.empty()) throw UsageError("fit: --collectives FILE is required");
  std::string impl;
  const auto rows = read_collectives(o.collectives_path, o.impl, &impl);
  const LinkFit link = fit_link(rows);
  StepModel m;
  m.busbw_Bps = link.busbw_Bps;
  m.alpha_s = link.alpha_s;
  m.inputs = {{"collectives", {{"path", o.collectives_path}, {"impl", impl}, {"rows", link.rows},
                               {"rms_relative_residual", link.rms_relative_residual}}}};
  // The two levels, from a sweep across nodes (collective_sweep.hpp's "intra-node"/"inter-node").
  const nlohmann::json sweep = read_json(o.collectives_path, "--collectives");
  for (auto [level, target] : {std::pair{"intra-node", &m.intra}, std::pair{"inter-node", &m.inter}}) {
    const bool present = std::any_of(sweep["rows"].begin(), sweep["rows"].end(),
                                     [name = std::string(level)](const nlohmann::json& r) {  // clang 14: no binding captures
                                       return r.is_object() && r.contains("impl") && r.at("impl") == name;
                                     });
    if (!present) continue;
    const LinkFit f = fit_link(read_collectives(o.collectives_path, level));
    *target = {f.busbw_Bps, f.alpha_s};
    m.inputs["collectives"][level] = {{"rows", f.rows}, {"rms_relative_residual", f.rms_relative_residual}};
  }
  if (o.scaling != "auto" && o.scaling != "weak" && o.scaling != "strong")
    throw UsageError("--scaling '" + o.scaling + "' is not one of auto, weak, strong");
  if (o.overlap > 1) throw UsageError("--overlap " + fmt("%g", o.overlap) + " is not in [0, 1]");
  m.overlap = std::max(0.0, o.overlap);
  if (o.run_dirs.empty()) {
    m.scaling = o.scaling == "strong" ? Scaling::kStrong : Scaling::kWeak;
    m.inputs["runs"] = nlohmann::json::array();
    m.inputs["note"] = "no --runs: compute_s, straggler and collectives not fitted; give --compute-ms etc. to predict";
    return m;
  }
  std::vector<RunSample> runs;
  for (const auto& d : o.run_dirs) runs.push_back(read_run(d));
  // Scaling: equal global tokens per step at every W is strong scaling, tokens growing with W weak.
  std::string scaling = o.scaling;
  std::string scaling_why = "given";
  if (scaling == "auto") {
    std::set<int> worlds;
    for (const auto& r : runs) worlds.insert(r.world);
    auto same = [&](bool per_rank) {
      const double ref = runs[0].tokens_per_step / (per_rank ? runs[0].world : 1);
      for (const auto& r : runs)
        if (std::fabs(r.tokens_per_step / (per_rank ? r.world : 1) / ref - 1) > 0.01) return false;
      return true;
    };
    if (worlds.size() < 2) scaling = "strong", scaling_why = "one world size: ddp-train keeps --global-batch fixed";
    else if (same(false)) scaling = "strong", scaling_why = "equal tokens per step at every W";
    else if (same(true)) scaling = "weak", scaling_why = "tokens per step proportional to W";
    else throw UsageError("fit: the runs' tokens per step are neither equal nor proportional to W; give --scaling");
  }
  m.scaling = scaling == "weak" ? Scaling::kWeak : Scaling::kStrong;
  if (o.overlap < 0) {  // measured: 1 - exposed / total over the runs with communication
    double sum = 0;
    int n = 0;
    for (const auto& r : runs)
      if (r.world > 1 && r.comm_total_s > 0) sum += std::clamp(1 - r.comm_exposed_s / r.comm_total_s, 0.0, 1.0), ++n;
    m.overlap = n ? sum / n : 0.0;
  }
  const ComputeFit cf = fit_compute(runs, link, m.scaling, m.overlap);
  m.compute_s = cf.compute_s;
  m.straggler = cf.straggler;
  const RunSample* widest = &runs[0];
  for (const auto& r : runs)
    if (r.world > widest->world) widest = &r;
  m.collectives = widest->collectives;
  m.tokens_per_step = m.scaling == Scaling::kWeak ? widest->tokens_per_step / widest->world : widest->tokens_per_step;
  nlohmann::json rj = nlohmann::json::array();
  for (const auto& r : runs)
    rj.push_back({{"path", r.path}, {"world_size", r.world}, {"median_step_s", r.step_s}, {"tokens_per_step", r.tokens_per_step},
                  {"comm_total_s", r.comm_total_s}, {"comm_exposed_s", r.comm_exposed_s},
                  {"collectives", collectives_json(r.collectives)}});
  m.inputs["runs"] = rj;
  m.inputs["scaling"] = {{"value", scaling}, {"why", scaling_why}};
  m.inputs["overlap"] = o.overlap < 0 ? "measured: mean of 1 - comm_exposed_s / comm_total_s over runs with W > 1" : "given";
  m.inputs["compute_fit"] = {{"rms_relative_residual", cf.rms_relative_residual},
                             {"straggler_fitted", cf.straggler_fitted},
                             {"collectives_from", widest->path}};
  return m;
}

// ---------------------------------------------------------------- plan ----------------------------

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
  if (!(params >= 1000) || params > 1e13) throw UsageError("--params " + fmt("%g", params) + " is not in [1000, 1e13]");
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
  std::string s = "plan: " + fmt("%.4g", params) + " parameters as a GPT-2 shaped model (n_layer " +
                  std::to_string(config.n_layer) + ", d_model " + std::to_string(config.d_model) + ", n_head " +
                  std::to_string(config.n_head) + ", vocab " + std::to_string(config.vocab) + ", seq_len " +
                  std::to_string(config.seq_len) + ": " + fmt("%.0f", double(config.parameter_count())) +
                  " parameters), gradient accumulation " + std::to_string(grad_accum) + " at TP 1, compute " +
                  fmt("%.3f", compute_s * 1e3) + " ms per rank per step\n";
  std::string degrees;
  for (int t : tp_degrees) degrees += (degrees.empty() ? "" : ", ") + std::to_string(t);
  s += "tensor parallelism: TP degrees " + degrees + " (dividing the ranks, the " + std::to_string(config.n_head) +
       " heads and 4 x d_model = " + std::to_string(4 * config.d_model) +
       "); each ZeRO stage over DP = ranks / TP; TP adds per micro-batch 4L+2 all-reduces of 4NC bytes, one of "
       "8N and an all-gather of 4N x TP (N = micro-batch x seq_len), not overlapped\n";
  if (!tp_note.empty()) s += "  (" + tp_note + ")\n";
  char line[320];
  std::snprintf(line, sizeof(line), "%4s %-13s %4s %4s %12s %12s %10s %10s %10s %12s  %s\n", "rank", "layout", "dp",
                "tp", "memory_GB", "state_GB", "step_ms", "comm_ms", "tp_ms", "tokens/s", "verdict");
  s += line;
  int rank = 0;
  for (const auto& r : rows) {
    const std::string verdict = r.fits ? "fits" : "excluded: " + r.reason;
    std::snprintf(line, sizeof(line), "%4s %-13s %4d %4d %12.3f %12.3f %10.3f %10.3f %10.3f %12.1f  %s\n",
                  r.fits ? std::to_string(++rank).c_str() : "-", r.layout.c_str(), r.dp, r.tp, r.memory.total() / 1e9,
                  r.memory.model_state / 1e9, r.predicted.step_s * 1e3, r.predicted.comm_s * 1e3, r.tp_comm_s * 1e3,
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
                                    {"activations", r.memory.activations}}},
                  {"fits", r.fits},
                  {"reason", r.reason},
                  {"collectives", collectives_json(r.collectives)},
                  {"tp_collectives", collectives_json(r.tp_collectives)},
                  {"dp_comm_s", r.dp_comm_s},
                  {"tp_comm_s", r.tp_comm_s},
                  {"predicted", r.predicted.to_json()}});
  return {{"format", "shardtrain-plan"},
          {"params", params},
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

// The DP-axis collectives of ZeRO stage `stage` (0: DDP) for `local_params` parameters per rank in
// `units` gather/scatter units, `accum` micro-batches per step.
std::vector<StepCollective> dp_collectives(int stage, double local_params, double units, double accum) {
  const double bucket = 4.0 * 1024 * 1024;  // ddp-train's default --bucket-mb 4
  const double grad_bytes = 4 * local_params, per_unit = 4 * local_params / units;
  switch (stage) {
    case 0: {  // bucketed all-reduce of the gradients
      const double calls = std::ceil(grad_bytes / bucket);
      return {{CollectiveOp::kAllReduce, grad_bytes / calls, calls}};
    }
    case 1:  // reduce-scatter the gradients, all-gather the updated parameters
      return {{CollectiveOp::kReduceScatter, per_unit, units}, {CollectiveOp::kAllGather, per_unit, units}};
    case 2:  // gradients scattered after every micro-batch
      return {{CollectiveOp::kReduceScatter, per_unit, units * accum}, {CollectiveOp::kAllGather, per_unit, units}};
    default:  // parameters gathered for forward and again for backward, every micro-batch
      return {{CollectiveOp::kAllGather, per_unit, 2 * units * accum},
              {CollectiveOp::kReduceScatter, per_unit, units * accum}};
  }
}

// GptModel's tensor-parallel collectives of one step (see PlanRow).
std::vector<StepCollective> tp_collectives(const ModelConfig& cfg, int micro_batch, int tp, double accum) {
  if (tp <= 1) return {};
  const double N = double(micro_batch) * cfg.seq_len, C = cfg.d_model;
  return {{CollectiveOp::kAllReduce, 4 * N * C, (4.0 * cfg.n_layer + 2) * accum},
          {CollectiveOp::kAllReduce, 8 * N, accum},
          {CollectiveOp::kAllGather, 4 * N * tp, accum}};
}

double comm_seconds(const std::vector<StepCollective>& cs, int world, const StepModel& m) {
  double t = 0;
  for (const auto& c : cs) t += c.calls * collective_seconds(c.op, c.bytes, world, m.busbw_Bps, m.alpha_s);
  return t;
}

}  // namespace

Plan plan_layouts(const PlanOptions& o) {
  if (o.ranks < 1) throw UsageError("--ranks must be >= 1, got " + std::to_string(o.ranks));
  if (!(o.memory_per_rank > 0)) throw UsageError("--memory-per-rank must be > 0 bytes, got " + fmt("%g", o.memory_per_rank));
  if (o.micro_batch < 1) throw UsageError("--micro-batch must be >= 1");
  if (!(o.peak_flops > 0)) throw UsageError("--peak-gflops must be > 0");
  const std::int64_t global = o.global_batch > 0 ? o.global_batch : std::int64_t(o.micro_batch) * o.ranks;
  if (global % (std::int64_t(o.micro_batch) * o.ranks) != 0)
    throw UsageError("--global-batch " + std::to_string(global) + " is not a multiple of --micro-batch x --ranks");
  Plan plan;
  plan.params = o.params;
  plan.config = model_for_parameter_count(o.params, o.vocab, o.seq_len);
  plan.grad_accum = int(global / (std::int64_t(o.micro_batch) * o.ranks));
  const double tokens = double(global) * o.seq_len;
  // Per rank per step: the model's --compute-ms when given, else 3 x forward FLOPs at the peak.
  // Tensor parallelism divides a DP rank's matrix products over its TP ranks, so the compute per
  // rank is the same for every layout of the same ranks (the replicated LayerNorms and the
  // softmax are a small share, ignored).
  plan.compute_s = o.model.compute_s > 0 ? o.model.compute_s : plan.config.flops_per_token() * tokens / o.ranks / o.peak_flops;
  const ModelConfig& cfg = plan.config;
  const double units = cfg.n_layer + 2.0;  // embeddings, blocks, head: ZeRO's gather/scatter unit
  // The TP degrees the planner accepts on these ranks (DDP, no budget: the mesh alone); a device
  // without tensor-parallel ops accepts TP 1 only, and the note says why.
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
  StepModel link = o.model;
  link.compute_s = plan.compute_s;
  link.tokens_per_step = tokens;
  link.collectives.clear();
  link.validate();
  static const char* const names[] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
  if (o.nodes < 1 || o.ranks % o.nodes != 0)
    throw UsageError("--nodes " + std::to_string(o.nodes) + " must divide --ranks " + std::to_string(o.ranks));
  if (o.layouts.empty()) throw UsageError("plan: no --layout");
  const int per_node = o.ranks / o.nodes;
  for (int tp : plan.tp_degrees) {
    const int dp = o.ranks / tp;
    const int accum = int(global / (std::int64_t(o.micro_batch) * dp));
    const double local_params = double(ParameterRegistry(cfg, {tp, 0}).total());  // one TP rank's share
    for (int stage = 0; stage <= 3; ++stage)
    for (CommLayout comm_layout : o.nodes > 1 ? o.layouts : std::vector<CommLayout>{CommLayout::kFlat}) {
      PlanRow r;
      r.layout = std::string(names[stage]) + (tp > 1 ? " x TP" + std::to_string(tp) : "") +
                 (o.nodes > 1 ? std::string(", ") + comm_layout_name(comm_layout) : "");
      r.zero_stage = stage;
      r.dp = dp;
      r.tp = tp;
      r.grad_accum = accum;
      r.memory = estimate_memory(cfg, stage, o.ranks, o.micro_batch, accum, o.deterministic, tp, o.device);
      const LayoutDecision d = plan_layout(layout_request(o, cfg, global, tp, stage));
      r.fits = d.accepted();
      if (!r.fits && *d.refusal == LayoutRefusal::kMemoryBudget)
        r.reason = "needs " + gb(r.memory.total()) + " per rank, budget " + gb(o.memory_per_rank);
      else if (!r.fits)
        r.reason = d.message;  // a stage this device does not run
      r.collectives = dp_collectives(stage, local_params, units, accum);
      r.tp_collectives = tp_collectives(cfg, o.micro_batch, tp, accum);
      if (o.nodes > 1 && per_node % tp == 0) {  // the DP group spans the nodes, each TP group inside one
        const Topology dp_topology{o.nodes, per_node / tp};
        r.dp_comm_s = 0;
        for (const auto& c : r.collectives) r.dp_comm_s += c.calls * collective_cost(link, c.op, c.bytes, dp_topology, comm_layout).seconds;
        StepModel tp_link = link;
        if (link.intra.known()) tp_link.busbw_Bps = link.intra.busbw_Bps, tp_link.alpha_s = link.intra.alpha_s;
        r.tp_comm_s = comm_seconds(r.tp_collectives, tp, tp_link);
      } else {
        r.dp_comm_s = comm_seconds(r.collectives, dp, link);
        r.tp_comm_s = comm_seconds(r.tp_collectives, tp, link);
      }
      StepTerms& t = r.predicted;
      t.world = o.ranks;
      t.compute_s = plan.compute_s;
      t.comm_s = r.dp_comm_s + r.tp_comm_s;
      t.exposed_comm_s = (1 - link.overlap) * r.dp_comm_s + r.tp_comm_s;
      t.straggler_s = t.compute_s * link.straggler * std::log2(double(o.ranks));
      t.step_s = t.compute_s + t.exposed_comm_s + t.straggler_s;
      t.tokens_per_s = tokens / t.step_s;
      t.speedup = t.tokens_per_s / (tokens / (plan.compute_s * o.ranks));  // one rank: all the compute, no comm
      t.efficiency = t.speedup / o.ranks;
      plan.rows.push_back(r);
    }
  }
  std::stable_sort(plan.rows.begin(), plan.rows.end(), [](const PlanRow& a, const PlanRow& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.predicted.tokens_per_s > b.predicted.tokens_per_s * (1 + 1e-12);
    return a.memory.total() < b.memory.total();
  });
  return plan;
}

}  // namespace shardtrain::scaling
