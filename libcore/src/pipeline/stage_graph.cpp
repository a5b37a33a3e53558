// The stage graph and the options it is built from (stage_graph.hpp). Pure: no file is read here.
#include "shardtrain/pipeline/stage_graph.hpp"

#include <algorithm>
#include <regex>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/telemetry/run_evidence.hpp"

namespace shardtrain::pipeline {

namespace {

// A positive whole number without sign or leading zero, as the shell's ^[1-9][0-9]*$; nullopt-like
// -1 otherwise (and for values that do not fit an int).
int positive_whole(const std::string& text) {
  static const std::regex re("[1-9][0-9]{0,8}");
  return std::regex_match(text, re) ? std::stoi(text) : -1;
}

}  // namespace

int require_positive(const std::string& text, const std::string& option) {
  const int v = positive_whole(text);
  if (v < 0) throw UsageError(option + " must be a positive whole number (got '" + text + "')");
  return v;
}

std::string absolute_path(const std::string& path, const std::string& cwd) {
  return path.empty() || path[0] == '/' ? path : cwd + "/" + path;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string model_options(const std::string& model) {
  const std::vector<std::string> words = split_words(model);
  if (words.size() == 1 && words[0].rfind('-', 0) != 0) return "--model " + words[0];
  return model;
}

Settings validate(const PipelineArgs& a, const std::string& cwd) {
  if (a.input.empty() || a.cutoff.empty() || a.name.empty())
    throw UsageError("--input, --cutoff and --name are required (see --help)");
  Settings s;
  s.np = require_positive(a.np, "--np");
  s.steps = require_positive(a.steps, "--steps");
  s.seq_len = require_positive(a.seq_len, "--seq-len");
  s.check_replicas = require_positive(a.check_replicas, "--check-replicas");
  s.base_steps = a.base_steps.empty() ? std::min(s.steps, 40) : positive_whole(a.base_steps);
  // Scale points: the world sizes other than 1 (the baseline) and --np (the main run), once each.
  std::string list = a.scale_points;
  std::replace(list.begin(), list.end(), ',', ' ');
  for (const std::string& w : split_words(list)) {
    const int v = positive_whole(w);
    if (v < 0) throw UsageError("--scale-points takes world sizes like 4,8 (got '" + w + "')");
    if (v != 1 && v != s.np && std::find(s.scale.begin(), s.scale.end(), v) == s.scale.end()) s.scale.push_back(v);
  }
  if (s.base_steps < 0) throw UsageError("--base-steps must be a positive whole number");
  if (a.device != "cpu" && a.device != "cuda") throw UsageError("--device must be cpu or cuda");
  if (a.launcher != "srun" && a.launcher != "mpirun") throw UsageError("--launcher must be srun or mpirun");
  s.input = absolute_path(a.input, cwd);
  s.cutoff = a.cutoff;
  s.name = a.name;
  s.model = model_options(a.model);
  s.train_args = a.train_args;
  s.proof_args = a.proof_args;
  s.device = a.device;
  s.launcher = a.launcher;
  s.home = a.home;
  s.bin = a.bin.empty() ? a.bin : absolute_path(a.bin, cwd);  // train.sbatch runs it from the job's folder
  s.root = absolute_path(a.root.empty() ? (a.home.empty() ? cwd : a.home) : a.root, cwd);
  s.run = s.root + "/run/" + s.name;
  s.data = s.run + "/data.h5";
  s.registry = a.registry.empty() ? s.root + "/run/registry" : a.registry;
  s.policy = !a.policy.empty() ? a.policy : a.home.empty() ? "" : a.home + "/scripts/release-policy.json";
  s.sbatch = a.sbatch;
  s.train_sbatch = a.train_sbatch;
  s.proof = a.proof;
  s.local = a.local;
  s.stage = a.stage;
  return s;
}

const Stage* StageGraph::find(const std::string& name) const {
  for (const Stage& st : stages)
    if (st.name == name) return &st;
  return nullptr;
}

std::string StageGraph::names() const {
  std::string out;
  for (const Stage& st : stages) out += (out.empty() ? "" : " ") + st.name;
  return out;
}

StageGraph build_graph(const Settings& s) {
  StageGraph g;
  auto step = [&](const std::string& name, std::vector<std::string> needs, std::vector<std::string> outputs) {
    Stage st;
    st.name = name;
    st.needs = std::move(needs);
    st.outputs = std::move(outputs);
    g.stages.push_back(st);
  };
  auto train = [&](const std::string& name, int ranks, const std::string& folder, int steps,
                   std::vector<std::string> outputs) {
    Stage st;
    st.name = name;
    st.kind = StageKind::kTrain;
    st.ranks = ranks;
    st.run_dir = folder.empty() ? s.run : s.run + "/" + folder;
    st.steps = steps;
    st.needs = {"prep"};
    st.outputs = std::move(outputs);
    g.stages.push_back(st);
  };
  step("prep", {}, {"data.h5", run_evidence::kDataPrep});
  if (s.proof) {
    step("proof", {}, {run_evidence::kKillResume});
    g.stages.back().ranks = 2;  // the proof's own small job runs on two ranks
  }
  train("baseline", 1, "baseline", s.base_steps, {"baseline/summary.json", "baseline/params.h5"});
  train("twin", s.np, "twin", s.base_steps, {"twin/summary.json", "twin/params.h5"});
  std::vector<std::string> points = {"baseline", "train"};
  for (int w : s.scale) {
    const std::string folder = "scale-w" + std::to_string(w);
    train("scale" + std::to_string(w), w, folder, s.base_steps, {folder + "/summary.json"});
    points.push_back("scale" + std::to_string(w));
  }
  step("equiv", {"baseline", "twin"}, {run_evidence::kEquivalence});
  train("train", s.np, "", s.steps, {"summary.json", "checkpoints/latest"});
  step("report", points, {run_evidence::kScalingReport, run_evidence::kScalingReportText});
  step("decide", {"prep", "equiv", "report", "proof"}, {});  // its record goes to the registry
  step("costs", {}, {"costs.json"});
  g.stages.back().after_all = true;
  // A need that is not in the graph (proof with --no-proof) is left out.
  for (Stage& st : g.stages)
    st.needs.erase(std::remove_if(st.needs.begin(), st.needs.end(), [&](const std::string& n) { return !g.find(n); }),
                   st.needs.end());
  return g;
}

const Stage& stage_named(const StageGraph& graph, const std::string& name) {
  if (const Stage* st = graph.find(name)) return *st;
  throw UsageError("unknown stage '" + name + "' (" + graph.names() + ")");
}

std::vector<std::string> common_train_args(const Settings& s) {
  std::vector<std::string> a = {"--data", s.data, "--cutoff", s.cutoff, "--seq-len", std::to_string(s.seq_len)};
  const std::vector<std::string> model = split_words(s.model), extra = split_words(s.train_args);
  a.insert(a.end(), model.begin(), model.end());
  a.insert(a.end(), {"--device", s.device, "--deterministic", "--check-replicas", std::to_string(s.check_replicas)});
  // One learning-rate schedule for every run (the decay's length defaults to --steps, and the
  // scaling report refuses runs whose optimizers differ): the main run's, unless one is given.
  const bool set = std::count(model.begin(), model.end(), "--decay-steps") + std::count(extra.begin(), extra.end(), "--decay-steps") > 0;
  if (!set) a.insert(a.end(), {"--decay-steps", std::to_string(s.steps)});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<std::string> local_train_argv(const Settings& s, const Stage& st) {
  std::vector<std::string> a = {s.bin + "/run-resilient", "--max-restarts", "3", "--backoff", "2",
                                "--log", st.run_dir + "/restarts.json", "--",
                                "mpirun", "-np", std::to_string(st.ranks), s.bin + "/ddp-train"};
  const std::vector<std::string> common = common_train_args(s);
  a.insert(a.end(), common.begin(), common.end());
  a.insert(a.end(), {"--steps", std::to_string(st.steps), "--ckpt-every", "50", "--keep", "2", "--resume", "auto",
                     "--run-dir", st.run_dir});
  return a;
}


}  // namespace shardtrain::pipeline
