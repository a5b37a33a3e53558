#include "shardtrain/scaling/report.hpp"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/stepmodel/step_model.hpp"
#include "shardtrain/stepmodel/two_level.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"
#include "shardtrain/telemetry/straggler.hpp"
#include "shardtrain/telemetry/step_log.hpp"
#include "shardtrain/train/run_summary.hpp"

namespace shardtrain {

const char* const kBreakdownNames[kBreakdownSections] = {"data",      "forward",    "backward", "comm_exposed",
                                                         "optimizer", "checkpoint", "other"};

namespace {

namespace fs = std::filesystem;

// The step-log column of each measured section (all but "other").
constexpr const char* kBreakdownColumns[kBreakdownSections - 1] = {"data_s",         "fwd_s", "bwd_s",
                                                                   "comm_exposed_s", "opt_s", "ckpt_s"};
constexpr int kExposed = 3;

double median(std::vector<double> values) { return SeriesStats::of(std::move(values)).median; }

// Each rank's breakdown from the summary's per-rank table (one value per rank in each column).
std::vector<RankBreakdown> breakdown_of(const PerRankTable& table, int world, const std::string& run_dir) {
  std::vector<RankBreakdown> ranks(static_cast<std::size_t>(world));
  auto column = [&](const std::string& name) {
    const auto it = table.columns.find(name);
    if (it == table.columns.end() || int(it->second.by_rank.size()) != world)
      throw UsageError(run_dir + "/summary.json: per_rank_medians." + name + " has no value for each of " +
                       std::to_string(world) + " ranks");
    return it->second.by_rank;
  };
  const auto step = column("step_s");
  for (int c = 0; c < kBreakdownSections - 1; ++c) {
    const auto values = column(kBreakdownColumns[c]);
    for (int r = 0; r < world; ++r) ranks[r].section_s[c] = values[r];
  }
  for (int r = 0; r < world; ++r) {
    double measured = 0;
    for (int c = 0; c < kBreakdownSections - 1; ++c) measured += ranks[r].section_s[c];
    ranks[r].step_s = step[r];
    ranks[r].section_s[kBreakdownSections - 1] = std::max(0.0, step[r] - measured);
  }
  return ranks;
}

std::optional<LogThroughput> throughput_from_run_dir(const std::string& run_dir) {
  const std::map<int, std::string> logs = find_step_logs(run_dir);
  if (logs.empty()) return std::nullopt;
  std::vector<std::vector<StepLogEntry>> ranks;
  for (const auto& [rank, path] : logs) ranks.push_back(read_step_log(path).steps);
  return throughput_from_records(ranks);
}

// The section where `rank` loses the most time against the ranks' median of that section; with
// one rank, or when it is nowhere above the median, its largest section ("... (largest)").
std::string slowest_section_of(const std::vector<RankBreakdown>& ranks, int rank) {
  const auto& mine = ranks[std::size_t(rank)].section_s;
  int best = -1;
  double best_excess = 0;
  for (int c = 0; ranks.size() > 1 && c < kBreakdownSections; ++c) {
    std::vector<double> values;
    for (const auto& r : ranks) values.push_back(r.section_s[c]);
    const double excess = mine[c] - median(values);
    if (excess > best_excess) best = c, best_excess = excess;
  }
  if (best >= 0) return kBreakdownNames[best];
  const int largest = int(std::max_element(mine.begin(), mine.end()) - mine.begin());
  return std::string(kBreakdownNames[largest]) + " (largest)";
}

double compute_s(const RankBreakdown& r) { return r.step_s - r.section_s[kExposed]; }

std::string percent(double share) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << 100 * share << "%";
  return out.str();
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << value;
  return out.str();
}

// The most ranks that shared one host: from the summary's rank_hosts (a job across nodes, each
// node taken to have rank 0's CPU count), else all of them on rank 0's host (a summary without
// rank_hosts).
int busiest_host_ranks(const ScalingRun& run) {
  if (run.rank_hosts.empty()) return run.world_size;
  std::size_t most = 0;
  for (const auto& [host, ranks] : RankHosts{"", run.rank_hosts}.ranks_by_host()) most = std::max(most, ranks.size());
  return int(most);
}

// What limits a point and what to try. Each rule names its measurement, so a reader can check it;
// the thresholds (ActionThresholds) are set where the remedy is worth its cost.
std::vector<std::string> actions_for(const ScalingRun& run, const ScalingPoint& p, const ScalingRun* base,
                                     ScalingMode mode, const ActionThresholds& t) {
  std::vector<std::string> out;
  const int w = run.world_size;
  if (p.oversubscribed) {  // time-sharing makes every other limit look worse: advise nothing from it
    const int on_host = busiest_host_ranks(run);
    out.push_back("oversubscribed (" + std::to_string(on_host) + " ranks on a host of " + std::to_string(run.host_cpus) +
                  " CPUs): ranks take turns on cores, so this is not hardware scaling and its stragglers, exposed "
                  "communication and compute times are artefacts of that; measure W=" + std::to_string(w) +
                  " with at least " + std::to_string(on_host) + " cores per host");
    return out;
  }
  if (p.exposed_comm_share > t.exposed_comm_share)
    out.push_back("exposed communication " + percent(p.exposed_comm_share) +
                  " of a step: overlap the all-reduce with backward (fast mode) and tune --bucket-mb "
                  "(smaller buckets start earlier, larger ones cost fewer messages)");
  if (!run.stragglers.empty()) {
    std::string names;
    for (const auto& s : run.stragglers) names += (names.empty() ? "" : ", ") + s;
    out.push_back("straggler " + names + " (summary stragglers): check that rank's node and replace it if it stays slow");
  } else if (w > 1) {
    std::vector<double> compute;
    for (const auto& r : run.ranks) compute.push_back(compute_s(r));
    const double mid = median(compute), slow = compute_s(run.ranks[std::size_t(run.slowest_rank)]);
    if (mid > 0 && slow > (1 + t.straggler_excess) * mid)
      out.push_back("straggler: rank " + std::to_string(run.slowest_rank) + " computes " + percent(slow / mid - 1) +
                    " longer than the ranks' median (" + p.slowest_section + "): replace its node");
  }
  if (!run.network_stragglers.empty()) {
    std::string names;
    for (const auto& s : run.network_stragglers) names += (names.empty() ? "" : ", ") + s;
    out.push_back("network straggler " + names + " (summary network_stragglers): its links carry a fraction of the "
                  "others' rate; check that node's link (cable, switch port, shaping) before blaming its computation");
  }
  if (w > 1 && run.zero_stage == 0 && run.memory_bytes > 0 && run.optimizer_bytes / run.memory_bytes > t.optimizer_share)
    out.push_back("optimizer state " + percent(run.optimizer_bytes / run.memory_bytes) +
                  " of rank 0's memory, replicated on every rank: if memory limits the batch, shard it with "
                  "fsdp-train --zero-stage 1 (2 and 3 shard gradients and parameters too)");
  const std::int64_t rank_batch = run.global_batch / w;
  if (w > 1 && rank_batch < t.small_rank_batch)
    out.push_back("per-rank batch " + std::to_string(rank_batch) +
                  " samples: the all-reduce costs the same per step whatever the batch; raise --global-batch "
                  "(more accumulation per step) to amortise it");
  if (mode == ScalingMode::kWeak && base && base != &run && !base->ranks.empty()) {
    std::vector<double> compute;
    for (const auto& r : run.ranks) compute.push_back(compute_s(r));
    const double alone = compute_s(base->ranks[0]), here = median(compute);
    if (alone > 0 && here > (1 + t.compute_slowdown) * alone)
      out.push_back("per-rank compute " + percent(here / alone - 1) +
                    " slower than the W=1 run: ranks share caches and memory bandwidth (or cores)");
  }
  if (out.empty())
    out.push_back(p.efficiency && *p.efficiency >= 0.9
                      ? "none: E >= 0.9 and no limiter above its threshold"
                      : "no limiter above its threshold: compare forward/backward with the W=1 run");
  return out;
}

// The first key in which two problems differ ("model", "optimizer", ...).
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b) {
  for (const auto& [key, value] : a.items())
    if (!b.contains(key) || b[key] != value) return key;
  for (const auto& [key, value] : b.items())
    if (!a.contains(key)) return key;
  return "";
}

std::string describe(const ScalingRun& r) {
  return r.run_dir + " (W=" + std::to_string(r.world_size) + ", global batch " + std::to_string(r.global_batch) + ")";
}

// Same training problem, one run per W; returns the scaling mode the global batches show.
ScalingMode check_runs(const std::vector<ScalingRun>& runs) {
  // Another problem first: it is the more basic mistake (and may well share a W with the others).
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const std::string key = first_difference(runs[0].problem, runs[i].problem);
    if (!key.empty())
      throw UsageError(runs[0].run_dir + " and " + runs[i].run_dir + " are runs of different training problems (" +
                       key + " differs; config hashes " + runs[0].config_hash + " and " + runs[i].config_hash +
                       "); report runs of one model, optimizer and data snapshot");
  }
  for (std::size_t i = 1; i < runs.size(); ++i)
    if (runs[i].world_size == runs[i - 1].world_size)
      throw UsageError("two runs at W=" + std::to_string(runs[i].world_size) + ": " + runs[i - 1].run_dir + " and " +
                       runs[i].run_dir + "; give one run per world size");
  if (runs.size() == 1) return ScalingMode::kSingle;
  const auto& first = runs[0];
  bool strong = true, weak = true;
  for (const auto& r : runs) {
    strong = strong && r.global_batch == first.global_batch;
    weak = weak && r.global_batch * first.world_size == first.global_batch * r.world_size;
  }
  if (strong) return ScalingMode::kStrong;
  if (weak) return ScalingMode::kWeak;
  std::string list;
  for (const auto& r : runs) list += (list.empty() ? "" : ", ") + describe(r);
  throw UsageError("the runs' global batches are neither one global batch (strong scaling) nor one per-rank batch "
                   "(weak scaling): " + list);
}

ScalingPoint point_of(const ScalingRun& run, const ScalingRun* base) {
  ScalingPoint p;
  const double w = run.world_size;
  p.oversubscribed = run.host_cpus > 0 && busiest_host_ranks(run) > run.host_cpus;
  for (const auto& r : run.ranks)
    if (r.step_s > 0) p.exposed_comm_share = std::max(p.exposed_comm_share, r.section_s[kExposed] / r.step_s);
  p.slowest_section = slowest_section_of(run.ranks, run.slowest_rank);
  if (base) {
    p.speedup = run.throughput_tokens_per_s / base->throughput_tokens_per_s;
    p.efficiency = *p.speedup / w;
  }
  if (run.from_logs) {
    const double log = run.from_logs->throughput_tokens_per_s;
    p.throughput_deviation = std::abs(log - run.throughput_tokens_per_s) / run.throughput_tokens_per_s;
    if (base && base->from_logs) {
      p.log_efficiency = log / (w * base->from_logs->throughput_tokens_per_s);
      p.efficiency_deviation = std::abs(*p.log_efficiency - *p.efficiency) / *p.efficiency;
    }
  }
  p.within_tolerance = p.throughput_deviation.value_or(0) <= kRecomputeTolerance &&
                       p.efficiency_deviation.value_or(0) <= kRecomputeTolerance;
  return p;
}

// The formula with the numbers of one point: the largest W that is not oversubscribed (else the
// largest W), so the line a reader quotes is hardware scaling when there is any.
std::string formula_of(const ScalingReport& report, const ScalingRun& base) {
  std::size_t chosen = 0;  // runs are sorted by W: index 0 is W = 1, quoted only when it is alone
  for (std::size_t i = 1; i < report.points.size(); ++i)
    if (chosen == 0 || !report.points[i].oversubscribed || report.points[chosen].oversubscribed) chosen = i;
  const auto& run = report.runs[chosen];
  const auto& point = report.points[chosen];
  const std::string w = std::to_string(run.world_size);
  return "E(" + w + ") = " + thousands(run.throughput_tokens_per_s) + " / (" + w + " x " +
         thousands(base.throughput_tokens_per_s) + ") = " + fixed(*point.efficiency, 3) +
         (point.oversubscribed ? " (oversubscribed: not hardware scaling)" : "");
}

std::string or_dash(const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : "-"; }

template <class T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

const char* mode_name(ScalingMode mode) {
  switch (mode) {
    case ScalingMode::kStrong: return "strong";
    case ScalingMode::kWeak: return "weak";
    default: return "single";
  }
}

std::string thousands(double value) {
  const long long n = std::llround(value);
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

// What each gradient bucket's all-reduce ran: a hierarchical run sends every bucket of at least
// ranks-per-node elements through the two levels (comm/hierarchical.hpp's kAlways); under
// --allreduce auto with a step model, the buckets from the model's threshold on (kBySize).
static std::string bucket_algorithm(const ScalingRun& run) {
  if (run.hierarchical && run.chosen_by_size)
    return run.all_reduce_hierarchical_from
               ? "auto: hierarchical from " + std::to_string(*run.all_reduce_hierarchical_from) + " bytes, flat below"
               : "auto: flat (the step model never prices the two levels cheaper)";
  if (run.hierarchical) return "hierarchical (every bucket of >= ranks-per-node elements)";
  return run.allreduce_algorithm.empty() ? "-" : run.allreduce_algorithm + " (flat)";
}

ScalingRun scaling_run_of(const RunSummary& summary, const std::string& run_dir) {
  ScalingRun r;
  r.run_dir = run_dir;
  r.world_size = summary.world_size;
  if (r.world_size < 1) throw UsageError(run_dir + "/summary.json: world_size " + std::to_string(r.world_size));
  r.throughput_tokens_per_s = summary.throughput_tokens_per_s;
  if (!(r.throughput_tokens_per_s > 0)) throw UsageError(run_dir + "/summary.json: throughput_tokens_per_s is not positive");
  r.median_step_s = summary.median_step_s;
  // "config" is the checkpoint manifests' configuration object (opaque to the summary's type);
  // the report needs its global batch and compares the rest between runs.
  const nlohmann::json& config = summary.config;
  if (!config.contains("global_batch") || !config["global_batch"].is_number_integer())
    throw UsageError(run_dir + "/summary.json: config has no integer global_batch; not a ddp-train/fsdp-train run summary?");
  r.global_batch = config["global_batch"].get<std::int64_t>();
  r.config_hash = summary.identity.config_hash;
  // The problem: what must agree between runs of one scaling series. The layout (dp_size,
  // micro_batch, grad_accum) differs by W by design, and the global batch by weak scaling.
  r.problem = config;
  for (const char* layout : {"dp_size", "micro_batch", "grad_accum", "global_batch"}) r.problem.erase(layout);
  r.problem["data_snapshot_id"] = summary.identity.data_snapshot_id;
  r.zero_stage = r.problem.value("zero_stage", 0);
  r.ranks = breakdown_of(summary.per_rank_medians, r.world_size, run_dir);
  r.slowest_rank = std::clamp(summary.slowest_rank, 0, r.world_size - 1);
  r.host_cpus = summary.host.cpus;
  r.hostname = summary.host.hostname;
  if (int(summary.rank_hosts.size()) == r.world_size) r.rank_hosts = summary.rank_hosts;
  for (const StragglerFinding& s : summary.stragglers.stragglers)
    r.stragglers.push_back("rank " + std::to_string(s.rank) + " " + section_name(s.section));
  for (const NetworkStraggler& s : summary.network_stragglers.stragglers) {
    char figures[96];
    std::snprintf(figures, sizeof figures, " at %.3g MB/s against %.3g MB/s", s.rate_Bps * 1e-6, s.others_rate_Bps * 1e-6);
    r.network_stragglers.push_back("host " + s.host + figures);
  }
  r.optimizer_bytes = summary.memory_bytes_rank0.bytes(MemoryCategory::kOptimizer);
  r.memory_bytes = summary.memory_bytes_rank0.total;
  const CommStats& c = summary.communication.dp;
  r.allreduce_algorithm = c.all_reduce_algorithm;
  r.hierarchical = !c.levels.empty();
  if (r.hierarchical && summary.steps > 0) {
    r.nodes = c.nodes;
    r.ranks_per_node = c.ranks_per_node;
    r.intra_node_s_per_step = c.level_busy_s(false) / double(summary.steps);
    r.inter_node_s_per_step = c.level_busy_s(true) / double(summary.steps);
  }
  if (!c.hierarchical_from_bytes.empty()) {
    r.chosen_by_size = true;
    for (const auto& [op, bytes] : c.hierarchical_from_bytes)
      if (op == CollectiveOp::kAllReduce && bytes != kNeverHierarchical) r.all_reduce_hierarchical_from = bytes;
  }
  return r;
}

ScalingRun read_scaling_run(const std::string& run_dir) {
  const std::string path = run_dir + "/summary.json";
  if (!fs::exists(path)) throw UsageError(run_dir + ": no summary.json (not a finished ddp-train/fsdp-train run folder)");
  ScalingRun run = scaling_run_of(read_run_summary(path, "the run summary (ddp-train/fsdp-train)"), run_dir);
  run.from_logs = throughput_from_run_dir(run_dir);
  return run;
}

ScalingReport build_scaling_report(std::vector<ScalingRun> runs, const ActionThresholds& thresholds) {
  if (runs.empty()) throw UsageError("no run folders to report");
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.world_size < b.world_size; });
  ScalingReport report;
  report.mode = check_runs(runs);
  report.runs = std::move(runs);
  const ScalingRun* base = report.runs.front().world_size == 1 ? &report.runs.front() : nullptr;
  report.has_base = base != nullptr;
  for (const auto& run : report.runs) report.points.push_back(point_of(run, base));
  for (std::size_t i = 0; i < report.runs.size(); ++i)
    report.points[i].actions = actions_for(report.runs[i], report.points[i], base, report.mode, thresholds);
  if (base) report.formula = formula_of(report, *base);
  return report;
}

nlohmann::json report_json(const ScalingReport& report) {
  nlohmann::json points = nlohmann::json::array();
  for (std::size_t i = 0; i < report.points.size(); ++i) {
    const auto& run = report.runs[i];
    const auto& p = report.points[i];
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < run.world_size; ++r) {
      nlohmann::json row = {{"rank", r}, {"host", run.rank_hosts.empty() ? nlohmann::json() : nlohmann::json(run.rank_hosts[r])},
                            {"step_s", run.ranks[r].step_s}};
      for (int c = 0; c < kBreakdownSections; ++c) row[std::string(kBreakdownNames[c]) + "_s"] = run.ranks[r].section_s[c];
      ranks.push_back(row);
    }
    nlohmann::json recomputed = nullptr;
    if (run.from_logs)
      recomputed = {{"steps", run.from_logs->steps},
                    {"tokens_per_step", run.from_logs->tokens_per_step},
                    {"median_step_s", run.from_logs->median_step_s},
                    {"throughput_tokens_per_s", run.from_logs->throughput_tokens_per_s},
                    {"efficiency", or_null(p.log_efficiency)},
                    {"throughput_deviation", or_null(p.throughput_deviation)},
                    {"efficiency_deviation", or_null(p.efficiency_deviation)}};
    points.push_back({{"world_size", run.world_size},
                      {"run_dir", run.run_dir},
                      {"global_batch", run.global_batch},
                      {"per_rank_batch", double(run.global_batch) / run.world_size},
                      {"throughput_tokens_per_s", run.throughput_tokens_per_s},
                      {"median_step_s", run.median_step_s},
                      {"speedup", or_null(p.speedup)},
                      {"efficiency", or_null(p.efficiency)},
                      {"predicted_efficiency", or_null(p.predicted_efficiency)},
                      {"communication", {{"allreduce_algorithm", run.allreduce_algorithm},
                                         {"hierarchical", run.hierarchical},
                                         {"nodes", run.nodes},
                                         {"ranks_per_node", run.ranks_per_node},
                                         {"per_bucket", bucket_algorithm(run)},
                                         {"intra_node_s_per_step", run.intra_node_s_per_step},
                                         {"inter_node_s_per_step", run.inter_node_s_per_step},
                                         {"predicted_intra_node_s", or_null(p.predicted_intra_node_s)},
                                         {"predicted_inter_node_s", or_null(p.predicted_inter_node_s)}}},
                      {"recomputed", recomputed},
                      {"within_tolerance", p.within_tolerance},
                      {"oversubscribed", p.oversubscribed},
                      {"host", {{"hostname", run.hostname}, {"cpus", run.host_cpus}}},
                      {"slowest_rank", run.slowest_rank},
                      {"slowest_section", p.slowest_section},
                      {"exposed_comm_share", p.exposed_comm_share},
                      {"ranks", ranks},
                      {"actions", p.actions}});
  }
  return {{"mode", mode_name(report.mode)},
          {"efficiency_available", report.has_base},
          {"efficiency_note", report.has_base ? "E(W) = throughput_W / (W x throughput_1)"
                                              : "no W=1 run: speedup and E(W) need one and are not computed"},
          {"formula", report.formula},
          {"tolerance", {{"relative", kRecomputeTolerance},
                         {"why", "summary: rank 0's median step; recomputation: median of the per-step slowest "
                                 "rank; they differ by the ranks' skew at the step boundary"}}},
          {"prediction", {{"available", !report.model_path.empty()},
                          {"model", report.model_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.model_path)},
                          {"note", report.prediction_note}}},
          {"points", points}};
}

// The report's section on E recomputed from the step logs, beside the summary's.
static void markdown_recomputation(std::ostringstream& md, const ScalingReport& report) {
  md << "\n## Recomputation from the step logs\n\nE is recomputed from each run's steps.rank<R>.jsonl without the "
        "summary: tokens per step summed over the ranks, the step time of the slowest rank, medians over the steps "
        "after the first. Tolerance "
     << percent(kRecomputeTolerance)
     << " (relative, throughput and E): the summary uses rank 0's median step, the recomputation the per-step slowest "
        "rank; in a synchronous step they differ by the ranks' skew at the step boundary (about a millisecond), small "
        "against steps of 20 ms or more. Toy runs with steps of a few milliseconds, and oversubscribed runs (ranks "
        "out of step), can fall outside it without anything being wrong.\n\n";
  md << "| W | steps | tokens/step | median step (s) | tokens/s from logs | deviation | E deviation |\n"
        "|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < report.points.size(); ++i) {
    const auto& run = report.runs[i];
    const auto& p = report.points[i];
    if (!run.from_logs) {
      md << "| " << run.world_size << " | no step log | | | | | |\n";
      continue;
    }
    md << "| " << run.world_size << " | " << run.from_logs->steps << " | " << thousands(run.from_logs->tokens_per_step)
       << " | " << fixed(run.from_logs->median_step_s, 4) << " | " << thousands(run.from_logs->throughput_tokens_per_s)
       << " | " << (p.throughput_deviation ? percent(*p.throughput_deviation) : "-") << " | "
       << (p.efficiency_deviation ? percent(*p.efficiency_deviation) : "-") << " |\n";
  }
}

// The report's section on the data-parallel group's communication by link, measured and predicted.
static void markdown_links(std::ostringstream& md, const ScalingReport& report) {
  md << "\n## Communication by link (data-parallel group, milliseconds per step)\n\n"
     << "| W | all-reduce | nodes | per bucket | intra-node | inter-node | predicted intra | predicted inter |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < report.runs.size(); ++i) {
    const ScalingRun& run = report.runs[i];
    const ScalingPoint& p = report.points[i];
    const bool levels = run.hierarchical;
    auto ms = [](std::optional<double> v) { return v ? fixed(1e3 * *v, 2) : std::string("-"); };
    md << "| " << run.world_size << " | " << (run.allreduce_algorithm.empty() ? "-" : run.allreduce_algorithm) << " | "
       << (run.nodes > 0 ? std::to_string(run.nodes) + (run.ranks_per_node ? " x " + std::to_string(run.ranks_per_node) : " (uneven)")
                  : std::string("-"))
       << " | " << bucket_algorithm(run) << " | " << (levels ? fixed(1e3 * run.intra_node_s_per_step, 2) : "-") << " | "
       << (levels ? fixed(1e3 * run.inter_node_s_per_step, 2) : "-") << " | " << ms(p.predicted_intra_node_s) << " | "
       << ms(p.predicted_inter_node_s) << " |\n";
  }
}

std::string report_markdown(const ScalingReport& report) {
  std::ostringstream md;
  md << "# Scaling report\n\n";
  md << "Mode: **" << mode_name(report.mode) << " scaling** (" << report.runs.size() << " runs; "
     << (report.mode == ScalingMode::kStrong ? "one global batch" : report.mode == ScalingMode::kWeak ? "one per-rank batch" : "a single run")
     << "). Speedup S(W) = throughput_W / throughput_1; efficiency E(W) = throughput_W / (W x throughput_1).\n\n";
  if (report.has_base) md << "    " << report.formula << "\n\n";
  else md << "**No W=1 run: speedup and E(W) are not computed** (they are defined against one rank).\n\n";
  bool any_over = false;
  for (const auto& p : report.points) any_over = any_over || p.oversubscribed;
  if (any_over)
    md << "Rows marked **oversubscribed** ran more ranks than their host has CPUs: the ranks took turns on cores, "
          "so those rows measure time-sharing, not hardware scaling.\n\n";

  md << "| W | run | global batch | tokens/s | speedup | E(W) | E from step logs | check (tol " << percent(kRecomputeTolerance)
     << ") | predicted E (model) | hardware |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < report.points.size(); ++i) {
    const auto& run = report.runs[i];
    const auto& p = report.points[i];
    const std::string check = !run.from_logs ? "no step log" : p.within_tolerance ? "ok" : "**OUTSIDE tolerance**";
    const std::string hw = p.oversubscribed ? "**oversubscribed** (" + std::to_string(busiest_host_ranks(run)) +
                                                  " ranks, " + std::to_string(run.host_cpus) + " CPUs)"
                           : run.host_cpus > 0 ? std::to_string(run.host_cpus) + " CPUs"
                                               : "CPUs unknown";
    md << "| " << run.world_size << " | " << run.run_dir << " | " << run.global_batch << " | "
       << thousands(run.throughput_tokens_per_s) << " | " << or_dash(p.speedup, 3) << " | " << or_dash(p.efficiency, 3)
       << " | " << or_dash(p.log_efficiency, 3) << " | " << check << " | " << or_dash(p.predicted_efficiency, 3)
       << " | " << hw << " |\n";
  }

  md << "\n## Per-rank breakdown (median milliseconds per step)\n\n| W | rank (host) |";
  for (const char* name : kBreakdownNames) md << " " << name << " |";
  md << " step | |\n|---|---|";
  for (int c = 0; c <= kBreakdownSections + 1; ++c) md << "---|";
  md << "\n";
  for (std::size_t i = 0; i < report.points.size(); ++i) {
    const auto& run = report.runs[i];
    for (int r = 0; r < run.world_size; ++r) {
      md << "| " << run.world_size << (report.points[i].oversubscribed ? " (oversubscribed)" : "") << " | " << r
         << (run.rank_hosts.empty() ? "" : " (" + run.rank_hosts[r] + ")") << " |";
      for (double s : run.ranks[r].section_s) md << " " << fixed(1e3 * s, 2) << " |";
      md << " " << fixed(1e3 * run.ranks[r].step_s, 2) << " | "
         << (r == run.slowest_rank ? "slowest: " + report.points[i].slowest_section : "") << " |\n";
    }
  }

  md << "\n## Actions\n\n";
  for (std::size_t i = 0; i < report.points.size(); ++i)
    for (const auto& a : report.points[i].actions) md << "- W=" << report.runs[i].world_size << ": " << a << "\n";

  markdown_recomputation(md, report);
  md << "\n## Measured against predicted\n\n" << report.prediction_note << "\n";
  markdown_links(md, report);
  return md.str();
}

// The model's E(W) beside each measured point (scale-bench fit's model file: its compute, link,
// collectives, overlap and straggler), and the note that says where it came from.
static void add_predictions(ScalingReport& report, const std::string& model_path) {
  const scaling::StepModel model = scaling::read_step_model(model_path, "the --step-model step model (scale-bench fit)");
  for (std::size_t i = 0; i < report.runs.size(); ++i) {
    const ScalingRun& run = report.runs[i];
    report.points[i].predicted_efficiency = scaling::predict(model, run.world_size).efficiency;
    if (run.nodes > 1 && run.ranks_per_node > 0 && model.intra.known() && model.inter.known()) {
      const scaling::StepTerms t =
          scaling::predict_on(model, {run.nodes, run.ranks_per_node}, scaling::CommLayout::kHierarchical);
      report.points[i].predicted_intra_node_s = t.intra_comm_s;
      report.points[i].predicted_inter_node_s = t.inter_comm_s;
    }
  }
  std::ostringstream note;
  note << "Predicted E(W) from the model " << model_path << " (scale-bench fit): compute "
       << model.compute_s * 1e3 << " ms at W=1, busbw " << model.busbw_Bps / 1e9 << " GB/s, alpha "
       << model.alpha_s * 1e6 << " us, overlap " << model.overlap << ", straggler " << model.straggler << ", "
       << scaling::scaling_name(model.scaling) << " scaling.";
  report.prediction_note = note.str();
}

ScalingReport write_scaling_report(const std::vector<std::string>& run_dirs, const ScalingReportOptions& options) {
  require_gnuplot();  // before any work: a missing plotter is a one-line error, not half a report
  if (!options.model_path.empty() && !std::ifstream(options.model_path))  // a typo is not "no prediction"
    throw IoError(options.model_path + ": cannot read the --step-model file");
  std::vector<ScalingRun> runs;
  for (const auto& dir : run_dirs) runs.push_back(read_scaling_run(dir));
  ScalingReport report = build_scaling_report(std::move(runs));
  report.model_path = options.model_path;
  if (options.model_path.empty()) {
    report.prediction_note = "No --step-model given: the predicted column is empty.";
  } else {
    add_predictions(report, options.model_path);
  }
  fs::create_directories(options.out_dir);
  const auto plots = write_scaling_plots(report, options.out_dir);
  nlohmann::json json = report_json(report);
  json["plots"] = plots;
  write_json_file(options.out_dir + "/report.json", json);
  std::string md = report_markdown(report);
  md += "\n## Plots\n\n";
  for (const auto& p : plots) md += "![" + p + "](" + p + ")\n";
  write_file_atomically(options.out_dir + "/report.md", md);
  return report;
}

}  // namespace shardtrain
