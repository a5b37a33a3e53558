#include "shardtrain/scaling/fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/number_text.hpp"
#include "shardtrain/train/run_summary.hpp"

namespace shardtrain::scaling {
namespace {

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

// Equal global tokens per step at every W is strong scaling, tokens growing with W weak: the
// scaling and why, or `given` itself when it is not "auto".
std::pair<std::string, std::string> runs_scaling(const std::vector<RunSample>& runs, const std::string& given) {
  if (given != "auto") return {given, "given"};
  std::set<int> worlds;
  for (const auto& r : runs) worlds.insert(r.world);
  auto same = [&](bool per_rank) {
    const double ref = runs[0].tokens_per_step / (per_rank ? runs[0].world : 1);
    for (const auto& r : runs)
      if (std::fabs(r.tokens_per_step / (per_rank ? r.world : 1) / ref - 1) > 0.01) return false;
    return true;
  };
  if (worlds.size() < 2) return {"strong", "one world size: ddp-train keeps --global-batch fixed"};
  if (same(false)) return {"strong", "equal tokens per step at every W"};
  if (same(true)) return {"weak", "tokens per step proportional to W"};
  throw UsageError("fit: the runs' tokens per step are neither equal nor proportional to W; give --scaling");
}

// 1 - exposed / total, averaged over the runs with communication (0 without any).
double measured_overlap(const std::vector<RunSample>& runs) {
  double sum = 0;
  int n = 0;
  for (const auto& r : runs)
    if (r.world > 1 && r.comm_total_s > 0) sum += std::clamp(1 - r.comm_exposed_s / r.comm_total_s, 0.0, 1.0), ++n;
  return n ? sum / n : 0.0;
}

nlohmann::json runs_json(const std::vector<RunSample>& runs) {
  nlohmann::json rj = nlohmann::json::array();
  for (const auto& r : runs)
    rj.push_back({{"path", r.path}, {"world_size", r.world}, {"median_step_s", r.step_s}, {"tokens_per_step", r.tokens_per_step},
                  {"comm_total_s", r.comm_total_s}, {"comm_exposed_s", r.comm_exposed_s},
                  {"fwd_s", r.forward_s}, {"bwd_s", r.backward_s},
                  {"collectives", collectives_json(r.collectives)}});
  return rj;
}

// The links: the one-level link from the chosen implementation's rows, and the two levels from
// a sweep across nodes (its "intra-node"/"inter-node" rows), with where they came from.
void fit_links(const FitOptions& o, StepModel& m) {
  const CollectiveSweep sweep = read_collective_sweep(o.collectives_path, "the --collectives sweep");
  const std::string where = "--collectives '" + o.collectives_path + "'";
  std::string impl;
  const std::vector<CollectiveSample> rows = collective_samples(sweep, o.impl, where, &impl);
  const LinkFit link = fit_link(rows);
  m.busbw_Bps = link.busbw_Bps;
  m.alpha_s = link.alpha_s;
  m.inputs = {{"collectives", {{"path", o.collectives_path}, {"impl", impl}, {"rows", link.rows},
                               {"rms_relative_residual", link.rms_relative_residual}}}};
  // Each operation's own link where the sweep has at least two of its rows.
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    std::vector<CollectiveSample> own;
    for (const auto& r : rows)
      if (r.op == op) own.push_back(r);
    if (own.size() < 2) continue;
    const LinkFit f = fit_link(own);
    m.op_links[op] = {f.busbw_Bps, f.alpha_s};
    m.inputs["collectives"]["per_op"][op_name(op)] = {{"rows", f.rows}, {"rms_relative_residual", f.rms_relative_residual}};
  }
  for (const auto& level_target : {std::pair{"intra-node", &m.intra}, std::pair{"inter-node", &m.inter}}) {
    // Not a structured binding: clang 14 (the sanitizer build's compiler) cannot capture one in a lambda.
    const std::string level = level_target.first;
    Link* const target = level_target.second;
    const bool present = std::any_of(sweep.rows.begin(), sweep.rows.end(), [&](const SweepRow& r) { return r.impl == level; });
    if (!present) continue;
    const LinkFit f = fit_link(collective_samples(sweep, level, where));
    *target = {f.busbw_Bps, f.alpha_s};
    m.inputs["collectives"][level] = {{"rows", f.rows}, {"rms_relative_residual", f.rms_relative_residual}};
  }
}

}  // namespace

std::vector<CollectiveSample> collective_samples(const CollectiveSweep& sweep, const std::string& impl,
                                                 const std::string& where, std::string* impl_used) {
  std::set<std::string> impls;
  for (const auto& r : sweep.rows) impls.insert(r.impl);
  std::string chosen = impl;
  if (chosen.empty()) chosen = impls.count("communicator-fast") || impls.size() != 1 ? "communicator-fast" : *impls.begin();
  if (!impls.count(chosen)) {
    std::string have;
    for (const auto& i : impls) have += (have.empty() ? "" : ", ") + i;
    throw UsageError(where + ": no rows of impl '" + chosen + "' (the file has: " + (have.empty() ? "none" : have) + ")");
  }
  std::vector<CollectiveSample> out;
  for (const auto& r : sweep.rows) {
    if (r.impl != chosen) continue;
    if (!is_modelled_op(r.op))
      throw UsageError(where + ": a row's 'op' is not AllReduce, ReduceScatter, AllGather or Broadcast");
    if (r.wrong != 0 || r.ranks < 2 || r.bytes == 0) continue;
    if (!(r.time_s > 0)) throw UsageError(where + ": a row has time_s <= 0");
    out.push_back({r.op, r.ranks, double(r.bytes), r.time_s});
  }
  if (out.size() < 2) throw UsageError(where + ": fewer than two usable rows (ranks >= 2, bytes > 0, wrong 0) of impl '" + chosen + "'");
  if (impl_used) *impl_used = chosen;
  return out;
}

std::vector<CollectiveSample> read_collectives(const std::string& path, const std::string& impl, std::string* impl_used) {
  return collective_samples(read_collective_sweep(path, "the --collectives sweep"), impl,
                            "--collectives '" + path + "'", impl_used);
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
  r.forward_s = median_of("fwd_s");
  r.backward_s = median_of("bwd_s");
  const int zero_stage = summary.memory_bytes_rank0.zero_stage;
  // The data-parallel group's own operations, in the order of their names (the order the file
  // lists them, which the fitted model's "collectives" keeps).
  std::vector<CollectiveOp> ops;
  for (int i = 0; i < kNumCollectiveOps; ++i) ops.push_back(CollectiveOp(i));
  std::sort(ops.begin(), ops.end(), [](CollectiveOp a, CollectiveOp b) { return std::string(op_name(a)) < op_name(b); });
  for (CollectiveOp op : ops) {
    const OpStats& stats = summary.communication.dp.per_op[static_cast<int>(op)];
    // Broadcast, Barrier and Split are start-up and control traffic, not the step's.
    if (stats.calls == 0 || !is_modelled_op(op) || op == CollectiveOp::kBroadcast) continue;
    const double calls = double(stats.calls), bytes = double(stats.bytes);
    // Fewer calls than steps: end-of-run traffic (the summary's own gathers), not the step's.
    if (!(calls >= steps && bytes > 0)) continue;
    const StepCollective c{op, bytes / calls, calls / steps};
    if (op != CollectiveOp::kAllGather || zero_stage == 0) {
      r.collectives.push_back(c);
    } else if (zero_stage < 3) {
      r.collectives.push_back({op, c.bytes, c.calls, CommPhase::kForward});
    } else {  // ZeRO-3 gathers each unit for forward and again for backward
      r.collectives.push_back({op, c.bytes, c.calls / 2, CommPhase::kForward});
      r.collectives.push_back({op, c.bytes, c.calls / 2});
    }
  }
  return r;
}

RunSample read_run(const std::string& run_dir) {
  const std::string path = run_dir.size() > 5 && run_dir.substr(run_dir.size() - 5) == ".json" ? run_dir
                                                                                                 : run_dir + "/summary.json";
  return run_sample_of(read_run_summary(path, "the --runs run summary"), path);
}

std::optional<std::pair<double, double>> measured_pass_shares(const std::vector<RunSample>& runs) {
  double forward = 0, backward = 0;
  int n = 0;
  for (const auto& r : runs) {
    const double compute = r.step_s - r.comm_exposed_s;
    if (!(r.forward_s > 0 && r.backward_s > 0 && compute > 0)) continue;
    const double scale = std::min(1.0, compute / (r.forward_s + r.backward_s));  // the shares' sum stays <= 1
    forward += r.forward_s * scale / compute, backward += r.backward_s * scale / compute, ++n;
  }
  if (n == 0) return std::nullopt;
  return std::make_pair(forward / n, backward / n);
}

ComputeFit fit_compute(const std::vector<RunSample>& runs, Scaling scaling) {
  if (runs.empty()) throw UsageError("fit: no runs to fit the compute time to");
  std::vector<std::array<double, 2>> A;
  std::vector<double> b, a0;
  std::set<int> worlds;
  for (const auto& r : runs) {
    const double g = scaling == Scaling::kWeak ? 1.0 : 1.0 / r.world;
    const double y = r.step_s - r.comm_exposed_s;  // = c0 g (1 + s log2 W)
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
    throw UsageError("fit: the runs' step times less their exposed communication give no positive compute; "
                     "check the runs' summaries");
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
  StepModel m;
  fit_links(o, m);
  if (o.scaling != "auto" && o.scaling != "weak" && o.scaling != "strong")
    throw UsageError("--scaling '" + o.scaling + "' is not one of auto, weak, strong");
  if (o.overlap > 1) throw UsageError("--overlap " + number_text("%g", o.overlap) + " is not in [0, 1]");
  m.overlap = std::max(0.0, o.overlap);
  if (o.run_dirs.empty()) {
    m.scaling = o.scaling == "strong" ? Scaling::kStrong : Scaling::kWeak;
    m.inputs["runs"] = nlohmann::json::array();
    m.inputs["note"] = "no --runs: compute_s, straggler and collectives not fitted; give --compute-ms etc. to predict";
    return m;
  }
  std::vector<RunSample> runs;
  for (const auto& d : o.run_dirs) runs.push_back(read_run(d));
  const auto [scaling, scaling_why] = runs_scaling(runs, o.scaling);
  m.scaling = scaling == "weak" ? Scaling::kWeak : Scaling::kStrong;
  if (o.overlap < 0) m.overlap = measured_overlap(runs);
  const auto shares = measured_pass_shares(runs);
  if (shares) std::tie(m.forward_share, m.backward_share) = *shares;
  const ComputeFit cf = fit_compute(runs, m.scaling);
  m.compute_s = cf.compute_s;
  m.straggler = cf.straggler;
  const RunSample* widest = &runs[0];
  for (const auto& r : runs)
    if (r.world > widest->world) widest = &r;
  m.collectives = widest->collectives;
  m.tokens_per_step = m.scaling == Scaling::kWeak ? widest->tokens_per_step / widest->world : widest->tokens_per_step;
  m.inputs["runs"] = runs_json(runs);
  m.inputs["scaling"] = {{"value", scaling}, {"why", scaling_why}};
  m.inputs["overlap"] = o.overlap < 0 ? "measured: mean of 1 - comm_exposed_s / comm_total_s over runs with W > 1" : "given";
  m.inputs["pass_shares"] = shares ? "measured: mean of fwd_s and bwd_s over median_step_s - comm_exposed_s"
                                : "FLOP split (no run logs fwd_s and bwd_s)";
  m.inputs["compute_fit"] = {{"rms_relative_residual", cf.rms_relative_residual},
                             {"straggler_fitted", cf.straggler_fitted},
                             {"collectives_from", widest->path}};
  return m;
}

}  // namespace shardtrain::scaling
