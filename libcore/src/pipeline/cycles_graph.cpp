// The continual cycles' options, graph, plans and outcome lines (cycles.hpp). Pure: no file is
// read here.
#include <algorithm>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/pipeline/cycles.hpp"
#include "shardtrain/telemetry/run_evidence.hpp"

namespace shardtrain::pipeline {

namespace {

std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The lines of `text` that match `re`, at most `most`.
std::vector<std::string> matching_lines(const std::string& text, const std::regex& re, std::size_t most) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; out.size() < most && std::getline(in, line);)
    if (std::regex_search(line, re)) out.push_back(line);
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : " ") + l;
  return out;
}

}  // namespace

std::string CyclesSettings::cycle_dir(int k) const { return work + "/cycle-" + std::to_string(k); }

CyclesSettings validate_cycles(const CyclesArgs& a, const std::string& cwd) {
  if (a.input.empty() || a.snapshots.empty() || a.holdout_s.empty() || a.work.empty())
    throw UsageError("--input, --snapshots, --holdout-s and --work are required (see --help)");
  CyclesSettings s;
  s.np = require_positive(a.np, "--np");
  s.steps = require_positive(a.steps, "--steps");
  s.first_steps = a.first_steps.empty() ? s.steps : require_positive(a.first_steps, "--first-steps");
  s.holdout_s = require_positive(a.holdout_s, "--holdout-s");
  s.baseline_order = require_positive(a.baseline_order, "--baseline-order");
  // Snapshots: "T1,T2,...", each a time strictly after the one before (cycle k monitors the
  // documents between T_(k-1) and T_k).
  std::istringstream list(a.snapshots);
  for (std::string t; std::getline(list, t, ',');) {
    std::string why;
    const auto unix_s = try_parse_rfc3339(t, &why);
    if (!unix_s)
      throw UsageError("--snapshots: '" + t + "' is not a time (an RFC 3339 date-time such as 2024-01-07T00:00:00Z: " +
                       why + ")");
    if (!s.snapshots.empty() && *unix_s <= s.snapshots.back().unix_s)
      throw UsageError("--snapshots: '" + t + "' is not after '" + s.snapshots.back().time +
                       "' (give the snapshot times in the order they happen)");
    s.snapshots.push_back({t, *unix_s, format_rfc3339(*unix_s - s.holdout_s)});
  }
  s.input = absolute_path(a.input, cwd);
  s.work = absolute_path(a.work, cwd);
  s.registry = a.registry.empty() ? s.work + "/registry" : absolute_path(a.registry, cwd);
  s.policy = !a.policy.empty() ? absolute_path(a.policy, cwd)
             : a.home.empty()  ? ""
                               : a.home + "/scripts/release-policy.json";
  if (s.policy.empty())
    throw UsageError("--policy: no release policy given and no clone found (give --policy FILE, or --home / "
                     "SHARDTRAIN_HOME: the clone holding scripts/release-policy.json)");
  s.bin = absolute_path(a.bin, cwd);
  s.prep_args = split_words(a.prep_args);
  s.train_args = split_words(a.train_args);
  s.gate_args = split_words(a.gate_args);
  s.baseline_args = split_words(a.baseline_args);
  s.slurm = a.slurm;
  s.sbatch = split_words(a.sbatch);
  s.stage = a.stage;
  return s;
}

StageGraph build_cycles_graph(const CyclesSettings& s) {
  StageGraph g;
  auto add = [&](int k, const std::string& step, std::vector<std::string> needs, int ranks = 1, int ok_up_to = 0) {
    Stage st;
    st.name = "cycle-" + std::to_string(k) + "/" + step;
    st.ranks = ranks;
    st.run_dir = s.cycle_dir(k);
    st.needs = std::move(needs);
    st.ok_up_to = ok_up_to;
    g.stages.push_back(st);
  };
  for (int k = 1; k <= int(s.snapshots.size()); ++k) {
    const std::string c = "cycle-" + std::to_string(k) + "/";
    add(k, "prep", {});
    g.stages.back().outputs = {"data.h5", run_evidence::kDataPrep, "prep.log"};
    std::vector<std::string> train_needs = {c + "prep"};
    if (k > 1) {
      add(k, "monitor", {c + "prep", "cycle-" + std::to_string(k - 1) + "/decide"}, 1, 1);
      g.stages.back().outputs = {"monitor.log"};
      train_needs.push_back(c + "monitor");
    }
    add(k, "train", train_needs, s.np);
    g.stages.back().outputs = {"summary.json", "checkpoints/"};
    add(k, "decide", {c + "train"}, 1, 1);
    g.stages.back().outputs = {"decide.log"};  // the record goes to the registry
    add(k, "costs", {c + "decide"}, 1);
    g.stages.back().outputs = {"costs.json"};
  }
  Stage total;
  total.name = "total";
  total.run_dir = s.work;
  total.after_all = true;
  total.outputs = {"costs.json"};
  g.stages.push_back(total);
  return g;
}

CycleStageName parse_cycle_stage_name(const std::string& name) {
  static const std::regex re("cycle-([1-9][0-9]{0,5})/([a-z]+)");
  std::smatch m;
  if (std::regex_match(name, m, re)) return {std::stoi(m[1].str()), m[2].str()};
  return {0, name};
}

InService in_service_from_pointer(const std::string& text, const std::string& path) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) throw IoError(path + ": not a last-known-good pointer (not a JSON object)");
  if (j.value("format_version", 1) > 2)
    throw IoError(path + ": format_version " + j["format_version"].dump() +
                  " is newer than this tool reads (2): use the tools of the release that wrote it");
  InService in;
  if (j.contains("baseline") && j["baseline"].is_object()) {
    in.kind = InService::Kind::kBaseline;
    in.baseline_name = j["baseline"].value("name", "");
    return in;
  }
  if (!j.contains("checkpoint") || !j["checkpoint"].is_string())
    throw IoError(path + ": names neither a baseline nor a release checkpoint");
  in.kind = InService::Kind::kRelease;
  in.checkpoint = j["checkpoint"].get<std::string>();
  return in;
}

StagePlan plan_cycle_stage(const CyclesSettings& s, const Stage& stage, const InService& in, int train_seq_len) {
  const CycleStageName n = parse_cycle_stage_name(stage.name);
  const std::string& gate = s.bin + "/release-gate";
  StagePlan plan;
  if (n.step == "total") {
    std::vector<std::string> argv = {gate, "costs"};
    for (int k = 1; k <= int(s.snapshots.size()); ++k) argv.push_back(s.cycle_dir(k));
    plan.commands.push_back({join(argv, {"--registry", s.registry, "--total", s.work + "/costs.json"}),
                             s.work + "/costs.log"});
    return plan;
  }
  if (n.cycle < 1 || n.cycle > int(s.snapshots.size())) throw UsageError("unknown stage '" + stage.name + "'");
  const std::string dir = s.cycle_dir(n.cycle), data = dir + "/data.h5";
  const Snapshot& snap = s.snapshots[n.cycle - 1];
  const std::string log = dir + "/" + n.step + ".log";
  if (n.step == "prep") {
    plan.commands.push_back(
        {join(join({s.bin + "/data-prep", s.input, "-o", data, "--available-by", snap.time}, s.prep_args),
              {"--progress-interval", "0"}),
         log});
  } else if (n.step == "monitor") {
    // The monitor scores releases only (a baseline has no release-time figures to compare with).
    if (in.kind == InService::Kind::kBaseline) {
      plan.skipped = "baseline " + in.baseline_name + " in service: nothing to monitor";
    } else if (in.kind == InService::Kind::kNone) {
      plan.skipped = "no release in service: nothing to monitor";
    } else {
      plan.commands.push_back(
          {join({gate, "monitor", "--registry", s.registry, "--policy", s.policy, "--data", data, "--since",
                 s.snapshots[n.cycle - 2].time, "--data-prep", dir + "/" + run_evidence::kDataPrep, "--run-dir", dir},
                s.gate_args),
           log, 1});
    }
  } else if (n.step == "train") {
    const bool fine_tune = in.kind == InService::Kind::kRelease;
    const std::string steps = std::to_string(fine_tune ? s.steps : s.first_steps);
    std::vector<std::string> argv = {"mpirun", "-np", std::to_string(stage.ranks), s.bin + "/ddp-train", "--data", data,
                                     "--cutoff", snap.cutoff, "--steps", steps, "--ckpt-every", steps, "--run-dir", dir};
    if (fine_tune) argv = join(argv, {"--resume", in.checkpoint, "--fine-tune"});
    plan.commands.push_back({join(argv, s.train_args), log});
  } else if (n.step == "decide") {
    std::string base = "last-known-good";
    if (in.kind == InService::Kind::kNone) {  // nothing in service yet: an n-gram of this snapshot's selection
      base = "ngram-cycle-" + std::to_string(n.cycle);
      plan.commands.push_back({join({gate, "baseline", base, "--registry", s.registry, "--data", data, "--cutoff",
                                     snap.cutoff, "--order", std::to_string(s.baseline_order), "--seq-len",
                                     std::to_string(train_seq_len)},
                                    s.baseline_args),
                               dir + "/baseline.log"});
    }
    plan.commands.push_back({join({gate, "decide", dir + "/checkpoints", "--policy", s.policy, "--registry", s.registry,
                                   "--baseline", base, "--data", data, "--cutoff", snap.cutoff, "--run-dir", dir},
                                  s.gate_args),
                             log, 1});
  } else if (n.step == "costs") {
    plan.commands.push_back({{gate, "costs", dir, "--registry", s.registry}, log});
  } else {
    throw UsageError("unknown stage '" + stage.name + "'");
  }
  return plan;
}

std::vector<std::string> cycle_stage_lines(const CycleStageName& n, const Snapshot& snap, const std::string& log_text,
                                           const std::string& prep_summary) {
  static const std::regex skipped("^skipped: "), verdict("^verdict|rolled back:"), decision("^decision"),
      reason("^  reason");
  if (const auto skip = matching_lines(log_text, skipped, 1); !skip.empty()) return {skip[0].substr(9)};
  if (n.step == "prep") {
    const auto j = nlohmann::json::parse(prep_summary, nullptr, false);
    if (!j.is_object()) return {};
    const auto field = [&](const char* key) { return j.contains(key) ? j[key].dump() : std::string("null"); };
    return {"snapshot as of " + snap.time + ": " + field("documents") + " documents (" + field("not_yet_available") +
            " not yet available)"};
  }
  if (n.step == "monitor") return {joined(matching_lines(log_text, verdict, 1000))};
  if (n.step == "decide")
    return {joined(join(matching_lines(log_text, decision, 1000), matching_lines(log_text, reason, 3)))};
  return {};
}

}  // namespace shardtrain::pipeline
