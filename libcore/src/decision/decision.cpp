#include "shardtrain/decision/decision.hpp"

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/decision/costs.hpp"
#include "shardtrain/decision/evidence.hpp"
#include "shardtrain/decision/policy.hpp"
#include "shardtrain/decision/registry.hpp"
#include "shardtrain/decision/rollback_rules.hpp"
#include "shardtrain/decision/service_timeline.hpp"

namespace shardtrain::release_gate {
namespace fs = std::filesystem;
namespace {

// The transformation state of the evaluated dataset: what data-prep recorded in it.
TransformationState transformation_state(const std::string& data_path) {
  const auto reader = data::DatasetReader::open(data_path);
  const auto& h = reader.header();
  TransformationState t;
  t.created_by = h.created_by;
  t.tokenizer = h.tokenizer;
  t.vocab = h.vocab;
  t.separator_token = h.separator_token;
  t.token_bits = h.token_bits;
  for (const auto& s : reader.sources()) t.sources.push_back({s.path, s.sha256_hex, s.bytes});
  // data-prep's and the generator's attributes, copied into the record as they are.
  if (const auto text = reader.string_attribute(data::kDataPrepAttribute))
    t.data_prep = JsonFile::parse(*text, data_path, "the dataset's data-prep attribute").json();
  if (const auto text = reader.string_attribute("synthetic_spec"))
    t.synthetic_spec = JsonFile::parse(*text, data_path, "the dataset's synthetic_spec attribute").json();
  return t;
}

// The baseline's evaluation and a description of it for the record, and what is in service.
struct BaselineChoice {
  CheckpointEvaluation evaluation;
  BaselineRef description;
  std::optional<ReleaseRecord> last_known_good;  // the release in service's record
  std::optional<BaselineRecord> baseline_in_service;  // or a baseline in service (a rollback put it back)
  std::optional<ServedBaseline> served;               // ... and its identity, as the pointer has it
};

BaselineChoice choose_baseline(const ReleaseRegistry& registry, const std::string& name) {
  BaselineChoice c;
  if (auto state = registry.in_service()) {
    c.last_known_good = std::move(state->release);
    c.baseline_in_service = std::move(state->baseline);
    c.served = state->pointer.baseline;
  }
  if (name == kLastKnownGood && c.served) {
    // What is in service is a baseline: the candidate is compared with it, by its own name.
    c.evaluation = c.baseline_in_service->evaluation;
    c.description = {c.served->name, c.baseline_in_service->kind, std::nullopt, std::nullopt,
                     registry.baseline_path(c.served->name, ".json")};
  } else if (name == kLastKnownGood) {
    if (!c.last_known_good)
      throw UsageError("--baseline last-known-good: " + registry.dir() + " has no last-known-good release yet; compare "
                       "the first release with a named baseline (release-gate baseline NAME ...)");
    c.evaluation = c.last_known_good->candidate;
    c.description = {kLastKnownGood, kCheckpointEvaluation, c.last_known_good->record_path,
                     c.last_known_good->artifact.folder, std::nullopt};
  } else {
    const BaselineRecord b = registry.baseline(name);
    c.evaluation = b.evaluation;
    c.description = {name, b.kind, std::nullopt, std::nullopt, registry.baseline_path(name, ".json")};
  }
  return c;
}

// What stays in service after a reject: the last known-good release if there is one, else the
// baseline in service (a rollback put it there), else the named baseline the candidate was
// compared with.
InService fallback_of(const ReleaseRegistry& registry, const BaselineChoice& b) {
  InService s;
  if (b.last_known_good) {
    s.name = kLastKnownGood;
    s.record = b.last_known_good->record_path;
    s.checkpoint = b.last_known_good->artifact.folder;
    return s;
  }
  if (b.served) {
    s.name = b.served->name;
    s.kind = b.baseline_in_service->kind;
    s.file = registry.baseline_path(b.served->name, ".json");
    return s;  // checkpoint: none
  }
  s.name = b.description.name;
  s.kind = b.description.kind;
  s.file = b.description.file.value_or("");
  return s;  // checkpoint: none
}

// The baseline in service scored on the candidate's hold-out: its registered evaluation when that
// is of the same positions, else its n-gram model (the file the pointer's sha256 names) scored
// again on the candidate's hold-out, as a release in service is (in_service_on below): a rollback
// to a baseline is followed by candidates on newer snapshots.
CheckpointEvaluation baseline_on(const ReleaseRegistry& registry, const BaselineChoice& b,
                                 const CheckpointEvaluation& candidate, const ReleaseEvalOptions& eval) {
  const CheckpointEvaluation& e = b.baseline_in_service->evaluation;
  if (e.scores.per_sequence && candidate.holdout.same_positions(e.holdout)) return e;
  log_line("release-gate: the baseline in service (" + b.served->name + ") was evaluated on another hold-out: "
           "scoring its n-gram again on the candidate's");
  HoldoutPlan plan = eval.holdout;
  plan.seq_len = candidate.holdout.seq_len;
  return evaluate_ngram(read_ngram_file((fs::path(registry.dir()) / b.served->model_file).string()), plan);
}

// The release in service scored on the candidate's hold-out: its record's evaluation when that is
// of the same positions and kept per-sequence losses, else evaluated again from its checkpoint (same
// options): a release recorded before per-sequence losses, or one released on an older snapshot
// (continual cycles: each snapshot has its own hold-out), so the two always compare position for
// position.
CheckpointEvaluation in_service_on(const ReleaseRecord& lkg, const CheckpointEvaluation& candidate,
                                   const ReleaseEvalOptions& eval) {
  const CheckpointEvaluation& e = lkg.candidate;
  if (!e.scores.per_sequence) {
    log_line("release-gate: the release in service was recorded without per-sequence losses: evaluating it again");
  } else if (!candidate.holdout.same_positions(e.holdout)) {
    log_line("release-gate: the release in service (" + lkg.record_path + ") was evaluated on another hold-out: "
             "evaluating it again on the candidate's");
  } else {
    return e;
  }
  return evaluate_checkpoint(lkg.artifact.folder, eval);
}

// The run's cost table: --costs, else <run_dir>/costs.json when it exists; nothing when there is none.
std::optional<CostTable> cost_table(const std::string& given, const std::string& run_dir) {
  std::string path = given;
  if (path.empty()) {
    path = (fs::path(run_dir) / "costs.json").string();
    if (!fs::exists(path)) return std::nullopt;
  }
  return CostTable::read(path);
}

}  // namespace

BaselineRecord register_baseline(const BaselineOptions& o) {
  const ReleaseRegistry registry(o.registry);
  const std::string model_file = registry.baseline_path(o.name, ".h5");  // validates the name first
  // Registering over the baseline in service would swap what serves under the pointer's feet (its
  // sha256 would no longer match, and every reader would refuse the registry).
  if (const auto pointer = registry.pointer(); pointer && pointer->baseline && pointer->baseline->name == o.name)
    throw UsageError("baseline '" + o.name + "' is in service in " + o.registry + " (put back by " +
                     pointer->rollback.value_or("?") + "); register the new one under another name");
  // The options first, so a refusal is the only line (not after a progress line that repeats the value).
  check_ngram_order(o.order);
  if (o.plan.seq_len < 1) throw UsageError("--seq-len must be at least 1 (got " + std::to_string(o.plan.seq_len) + ")");
  log_line("release-gate: fitting an order-" + std::to_string(o.order) + " n-gram on the training selection of " +
           o.plan.data_path + " (available by " + o.plan.cutoff + ")");
  data::TrainingData selection = open_selection(o.plan);  // read once, for fitting and scoring
  const NgramModel model = fit_ngram(o.plan, selection, o.order);
  BaselineRecord baseline;
  baseline.evaluation = evaluate_ngram(model, o.plan, std::move(selection));
  write_ngram_file(model, model_file);
  baseline.name = o.name;
  baseline.kind = kNgramEvaluation;
  baseline.order = o.order;
  baseline.model_file = fs::path(model_file).filename().string();
  baseline.created = now_rfc3339();
  baseline.code_version = code_version();
  registry.write_baseline(baseline);
  return baseline;
}

namespace {

// One decision's inputs, gathered before any check is scored: the baseline, the candidate and what
// promoting is weighed against.
struct DecisionInputs {
  BaselineChoice baseline;
  std::string run_dir;
  std::optional<CostTable> costs;
  CheckpointEvaluation candidate;
  std::optional<CheckpointEvaluation> in_service;
  std::string fallback_name;
  const CheckpointEvaluation& fallback_eval() const { return in_service ? *in_service : baseline.evaluation; }
};

// The scored checks, and the rubric and utility the promote reason quotes.
struct ScoredChecks {
  std::vector<CheckResult> checks;
  RubricScore rubric;
  UtilityEstimate utility;
};

DecisionInputs gather_inputs(const DecideOptions& o, const ReleaseRegistry& registry) {
  DecisionInputs in;
  in.baseline = choose_baseline(registry, o.baseline);
  BaselineChoice& baseline = in.baseline;

  // The hold-out: as given, else the baseline's, so the two always score the same positions.
  ReleaseEvalOptions eval = o.eval;
  const HoldoutIdentity& bh = baseline.evaluation.holdout;
  if (eval.holdout.data_path.empty()) eval.holdout.data_path = bh.data;
  if (eval.holdout.cutoff.empty()) eval.holdout.cutoff = bh.cutoff;
  eval.holdout.max_samples = o.max_samples.value_or(bh.max_samples);
  const std::string folder = resolve_checkpoint_folder(o.checkpoint);
  in.run_dir = o.run_dir.empty() ? fs::path(folder).parent_path().parent_path().string() : o.run_dir;
  in.costs = cost_table(o.costs_path, in.run_dir);  // before the evaluation: a bad file fails fast
  in.candidate = evaluate_checkpoint(folder, eval);
  // What promoting is weighed against: the release in service when there is one, else the named
  // baseline; last-known-good as the baseline is that same evaluation.
  if (baseline.last_known_good) in.in_service = in_service_on(*baseline.last_known_good, in.candidate, eval);
  else if (baseline.served) in.in_service = baseline_on(registry, baseline, in.candidate, eval);
  if (o.baseline == kLastKnownGood) baseline.evaluation = *in.in_service;
  in.fallback_name = baseline.last_known_good ? std::string(kLastKnownGood)
                     : baseline.served        ? baseline.served->name
                                              : baseline.description.name;
  return in;
}

ScoredChecks score_checks(const DecideOptions& o, const ReleasePolicy& policy, const ReleaseRegistry& registry,
                          const DecisionInputs& in) {
  const BaselineChoice& baseline = in.baseline;
  const CheckpointEvaluation& candidate = in.candidate;
  ScoredChecks s;
  s.checks = compare_with_baseline(policy, candidate, baseline.evaluation);
  // A rollback on slices still standing (nothing promoted since): those slices must be back within the
  // rule that rolled the release back (decision/rollback_rules.hpp). Its reference figures: the release in
  // service's release-time ones, or, with a baseline in service, the rolled-back release's own.
  if (const auto standing = standing_rollback(registry.history(), registry.rollbacks());
      standing && (baseline.last_known_good || baseline.served)) {
    const HoldoutSummary reference = baseline.last_known_good ? baseline.last_known_good->candidate.scores
                                                              : registry.record(standing->from.record).candidate.scores;
    for (auto& c : rolled_back_slice_checks(*standing, candidate.scores, reference,
                                            policy.rollback.value_or(RollbackRules{}).max_slice_regression,
                                            baseline.last_known_good ? "the release in service's"
                                                                     : "the rolled-back release's"))
      s.checks.push_back(std::move(c));
  }
  const std::vector<EvidenceResult> evidence =
      collect_evidence(policy, in.run_dir, o.evidence, candidate.holdout.dataset_snapshot_id);
  for (auto& c : score_rubric(policy, evidence, &s.rubric)) s.checks.push_back(std::move(c));
  s.utility = estimate_utility(policy.utility, candidate, in.fallback_eval(), in.fallback_name);
  for (auto& c : check_utility(s.utility)) s.checks.push_back(std::move(c));
  return s;
}

// The release record of the decision `promote`; decided, record_path and in_service.record not yet set.
ReleaseRecord release_record(const DecideOptions& o, const ReleasePolicy& policy, const ReleaseRegistry& registry,
                             const DecisionInputs& in, const ScoredChecks& s, bool promote) {
  const BaselineChoice& baseline = in.baseline;
  ReleaseRecord r;
  r.promote = promote;
  for (const auto& c : s.checks)
    if (!c.passed) r.reasons.push_back(c.name + ": " + c.reason);
  if (promote)
    r.reasons.push_back("every check passed, the rubric scored " + std::to_string(s.rubric.score) +
                        " and the expected utility over " + in.fallback_name + " is " +
                        std::to_string(s.utility.expected_utility) + " with P(regret) " +
                        std::to_string(s.utility.regret_probability));
  r.checks = s.checks;
  const CheckpointIdentity& ck = in.candidate.checkpoint;
  const HoldoutIdentity& h = in.candidate.holdout;
  r.data = {h.data, h.dataset_snapshot_id, h.selection_snapshot_id, h.cutoff, ck.data_snapshot_id, ck.data_cutoff};
  r.transformation = transformation_state(h.data);
  r.artifact = {ck.folder, ck.step, ck.manifest_sha256, ck.files};
  r.model = ck.model;
  r.run_config = ck.config;
  r.code_version = ck.code_version;
  r.candidate = in.candidate;
  r.baseline_evaluation = baseline.evaluation;
  r.rubric = s.rubric;
  r.utility = s.utility;
  r.costs = in.costs;
  r.policy = policy;
  r.baseline = baseline.description;
  if (baseline.last_known_good) r.previous_last_known_good = baseline.last_known_good->record_path;
  if (promote) {
    r.in_service.name = "candidate";
    r.in_service.checkpoint = ck.folder;
  } else {
    r.in_service = fallback_of(registry, baseline);
  }
  if (promote) r.review = ReviewNeed::of(policy.review.promote_minutes);
  r.dry_run = o.dry_run;
  r.release_gate_version = code_version();
  return r;
}

}  // namespace

Decision decide_release(const DecideOptions& o) {
  const std::string started = now_rfc3339();
  const ReleasePolicy policy = read_release_policy(o.policy_path);
  const ReleaseRegistry registry(o.registry);
  const DecisionInputs inputs = gather_inputs(o, registry);
  const ScoredChecks scored = score_checks(o, policy, registry, inputs);

  Decision d;
  d.promote = std::all_of(scored.checks.begin(), scored.checks.end(), [](const CheckResult& c) { return c.passed; });
  d.record = release_record(o, policy, registry, inputs, scored, d.promote);
  ReleaseRecord& r = d.record;
  r.started = started;
  r.decided = now_rfc3339();
  if (o.dry_run) return d;
  const std::string path = registry.write_record(r);
  r.record_path = path;
  if (d.promote) {
    r.in_service.record = path;
    registry.promote(path, r);
  }
  return d;
}

}  // namespace shardtrain::release_gate
