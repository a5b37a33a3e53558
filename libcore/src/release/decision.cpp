#include "shardtrain/release/decision.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/release/costs.hpp"
#include "shardtrain/release/evidence.hpp"
#include "shardtrain/release/policy.hpp"
#include "shardtrain/release/registry.hpp"

namespace shardtrain::release_gate {
namespace fs = std::filesystem;
namespace {

// The transformation state of the evaluated dataset: what data-prep recorded in it.
nlohmann::json transformation_state(const std::string& data_path) {
  const auto reader = data::DatasetReader::open(data_path);
  const auto& h = reader.header();
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : reader.sources()) sources.push_back({{"path", s.path}, {"sha256", s.sha256_hex}, {"bytes", s.bytes}});
  nlohmann::json prep = nullptr;
  if (const auto text = reader.string_attribute(data::kDataPrepAttribute)) prep = nlohmann::json::parse(*text);
  nlohmann::json synthetic = nullptr;
  if (const auto text = reader.string_attribute("synthetic_spec")) synthetic = nlohmann::json::parse(*text);
  return {{"created_by", h.created_by}, {"tokenizer", h.tokenizer}, {"vocab", h.vocab},
          {"separator_token", h.separator_token}, {"token_bits", h.token_bits}, {"data_prep", prep},
          {"synthetic_spec", synthetic}, {"sources", sources}};
}

// The baseline's evaluation and a description of it for the record.
struct BaselineChoice {
  nlohmann::json evaluation, description, last_known_good;  // last_known_good: the current one's record or null
};

BaselineChoice choose_baseline(const ReleaseRegistry& registry, const std::string& name) {
  BaselineChoice c;
  const auto lkg = registry.last_known_good();
  c.last_known_good = lkg ? *lkg : nlohmann::json(nullptr);
  if (name == kLastKnownGood) {
    if (!lkg)
      throw UsageError("--baseline last-known-good: " + registry.dir() + " has no last-known-good release yet; compare "
                       "the first release with a named baseline (release-gate baseline NAME ...)");
    c.evaluation = (*lkg)["scores"]["candidate"];
    c.description = {{"name", kLastKnownGood}, {"kind", "checkpoint"}, {"record", (*lkg)["record_path"]},
                     {"checkpoint", (*lkg)["artifact"]["folder"]}};
  } else {
    const nlohmann::json b = registry.baseline(name);
    c.evaluation = b.at("evaluation");
    c.description = {{"name", name}, {"kind", b.value("kind", "")}, {"file", registry.baseline_path(name, ".json")}};
  }
  return c;
}

// What stays in service after a reject: the last known-good release if there is one, else the
// named baseline the candidate was compared with.
nlohmann::json fallback_of(const BaselineChoice& b) {
  if (!b.last_known_good.is_null())
    return {{"name", kLastKnownGood}, {"record", b.last_known_good["record_path"]},
            {"checkpoint", b.last_known_good["artifact"]["folder"]}};
  return {{"name", b.description["name"]}, {"kind", b.description["kind"]}, {"checkpoint", nullptr},
          {"file", b.description.value("file", "")}};
}

// What promoting is weighed against: the release in service (last-known-good) when there is one,
// else the named baseline the candidate was compared with. Its evaluation must be of the same
// hold-out (as compare_with_baseline requires of the baseline). A release recorded before
// evaluations kept per-sequence losses is evaluated again from its checkpoint (same options), so a
// registry of older records keeps working.
std::pair<nlohmann::json, std::string> fallback_evaluation(const BaselineChoice& b, const nlohmann::json& candidate,
                                                           const ReleaseEvalOptions& eval) {
  if (b.last_known_good.is_null()) return {b.evaluation, b.description["name"].get<std::string>()};
  nlohmann::json e = b.last_known_good["scores"]["candidate"];
  if (!e["scores"].contains("per_sequence")) {
    log_line("release-gate: the release in service was recorded without per-sequence losses: evaluating it again");
    e = evaluate_checkpoint(b.last_known_good["artifact"]["folder"].get<std::string>(), eval);
  }
  nlohmann::json ch = candidate.at("holdout"), fh = e.at("holdout");
  ch.erase("data");
  fh.erase("data");
  if (ch != fh)
    throw UsageError("holdout_mismatch: the release in service (" + b.last_known_good["record_path"].get<std::string>() +
                     ") was evaluated on another hold-out than the candidate, so the utility of replacing it cannot be "
                     "measured; decide with the --data, --cutoff and --max-samples of its record");
  return {e, kLastKnownGood};
}

// The run's cost table: --costs, else <run_dir>/costs.json when it exists; null when there is none.
nlohmann::json cost_table(const std::string& given, const std::string& run_dir) {
  std::string path = given;
  if (path.empty()) {
    path = (fs::path(run_dir) / "costs.json").string();
    if (!fs::exists(path)) return nullptr;
  }
  return CostTable::read(path).to_json();
}

}  // namespace

nlohmann::json register_baseline(const BaselineOptions& o) {
  const ReleaseRegistry registry(o.registry);
  const std::string model_file = registry.baseline_path(o.name, ".h5");  // validates the name first
  log_line("release-gate: fitting an order-" + std::to_string(o.order) + " n-gram on the training selection of " +
           o.plan.data_path + " (available by " + o.plan.cutoff + ")");
  check_ngram_order(o.order);
  data::TrainingData selection = open_selection(o.plan);  // read once, for fitting and scoring
  const NgramModel model = fit_ngram(o.plan, selection, o.order);
  const nlohmann::json evaluation = evaluate_ngram(model, o.plan, std::move(selection));
  write_ngram_file(model, model_file);
  const nlohmann::json baseline = {{"format", "shardtrain-release-baseline"},
                                   {"name", o.name},
                                   {"kind", "ngram"},
                                   {"order", o.order},
                                   {"model_file", fs::path(model_file).filename().string()},
                                   {"created", now_rfc3339()},
                                   {"code_version", code_version()},
                                   {"evaluation", evaluation}};
  registry.write_baseline(o.name, baseline);
  return baseline;
}

Decision decide_release(const DecideOptions& o) {
  const std::string started = now_rfc3339();
  const ReleasePolicy policy = read_release_policy(o.policy_path);
  const ReleaseRegistry registry(o.registry);
  const BaselineChoice baseline = choose_baseline(registry, o.baseline);

  // The hold-out: as given, else the baseline's, so the two always score the same positions.
  ReleaseEvalOptions eval = o.eval;
  const auto& bh = baseline.evaluation.at("holdout");
  if (eval.holdout.data_path.empty()) eval.holdout.data_path = bh.at("data");
  if (eval.holdout.cutoff.empty()) eval.holdout.cutoff = bh.at("cutoff");
  eval.holdout.max_samples = o.max_samples.value_or(bh.at("max_samples").get<int>());
  const std::string folder = resolve_checkpoint_folder(o.checkpoint);
  const std::string run_dir = o.run_dir.empty() ? fs::path(folder).parent_path().parent_path().string() : o.run_dir;
  const nlohmann::json costs = cost_table(o.costs_path, run_dir);  // before the evaluation: a bad file fails fast
  const nlohmann::json candidate = evaluate_checkpoint(folder, eval);

  std::vector<CheckResult> checks = compare_with_baseline(policy, candidate, baseline.evaluation);
  const std::vector<EvidenceResult> evidence =
      collect_evidence(policy, run_dir, o.evidence, candidate["holdout"]["dataset_snapshot_id"]);
  nlohmann::json rubric;
  for (auto& c : score_rubric(policy, evidence, &rubric)) checks.push_back(std::move(c));
  const auto [fallback_eval, fallback_name] = fallback_evaluation(baseline, candidate, eval);
  const UtilityEstimate utility = estimate_utility(policy.utility, candidate, fallback_eval, fallback_name);
  for (auto& c : check_utility(utility)) checks.push_back(std::move(c));

  Decision d;
  d.promote = std::all_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.passed; });
  nlohmann::json reasons = nlohmann::json::array(), checks_json = nlohmann::json::array();
  for (const auto& c : checks) {
    checks_json.push_back(c.to_json());
    if (!c.passed) reasons.push_back(c.name + ": " + c.reason);
  }
  if (d.promote)
    reasons.push_back("every check passed, the rubric scored " + std::to_string(rubric["score"].get<double>()) +
                      " and the expected utility over " + fallback_name + " is " + std::to_string(utility.expected_utility) +
                      " with P(regret) " + std::to_string(utility.regret_probability));
  const auto& ck = candidate["checkpoint"];
  const auto& h = candidate["holdout"];
  d.record = {
      {"format", "shardtrain-release-record"},
      {"format_version", 2},
      {"decision", d.promote ? "promote" : "reject"},
      {"reasons", reasons},
      {"checks", checks_json},
      {"data",
       {{"dataset", h["data"]},
        {"dataset_snapshot_id", h["dataset_snapshot_id"]},
        {"holdout_selection_snapshot_id", h["selection_snapshot_id"]},
        {"cutoff", h["cutoff"]},
        {"training_selection_snapshot_id", ck["data_snapshot_id"]},
        {"training_cutoff", ck["data_cutoff"]}}},
      {"transformation", transformation_state(h["data"])},
      {"artifact",
       {{"folder", ck["folder"]}, {"step", ck["step"]}, {"manifest_sha256", ck["manifest_sha256"]}, {"files", ck["files"]}}},
      {"model", ck["model"]},
      {"run_config", ck["config"]},
      {"code_version", ck["code_version"]},
      {"scores", {{"candidate", candidate}, {"baseline", baseline.evaluation}}},
      {"rubric", rubric},
      {"utility", utility.to_json()},
      {"costs", costs},
      {"policy", policy.to_json()},
      {"baseline", baseline.description},
      {"previous_last_known_good",
       baseline.last_known_good.is_null() ? nlohmann::json(nullptr) : baseline.last_known_good["record_path"]},
      {"in_service", d.promote ? nlohmann::json{{"name", "candidate"}, {"checkpoint", ck["folder"]}} : fallback_of(baseline)},
      {"dry_run", o.dry_run},
      {"release_gate_version", code_version()},
      {"started", started},
      {"decided", now_rfc3339()}};
  if (o.dry_run) return d;
  const std::string path = registry.write_record(d.record, ck["manifest_sha256"]);
  d.record["record_path"] = path;
  if (d.promote) {
    d.record["in_service"]["record"] = path;
    registry.promote(path, d.record);
  }
  return d;
}

}  // namespace shardtrain::release_gate
