// `release-gate monitor`: the release in service scored on the matured documents, recorded, and
// rolled back when the rules say so (monitor.hpp).
#include "shardtrain/monitor/monitor.hpp"

#include <filesystem>
#include <sstream>

#include "decision/score_text.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/decision/policy.hpp"
#include "shardtrain/decision/registry.hpp"
#include "shardtrain/decision/rollback_rules.hpp"
#include "shardtrain/monitor/drift.hpp"
#include "shardtrain/monitor/rollback_target.hpp"

namespace shardtrain::release_gate {
namespace fs = std::filesystem;
namespace {

using score_text::find_slice;
using score_text::interval_text;
using score_text::num;

ReleasePolicy read_rollback_policy(const std::string& policy_path) {
  ReleasePolicy policy = read_release_policy(policy_path);
  if (!policy.rollback)
    throw UsageError(policy_path + ": the policy declares no \"rollback\" rules, so the monitor cannot say when a "
                     "release must go; add them (docs/FORMATS.md, \"Release policy\")");
  return policy;
}

// The release in service (its record in `release`), or UsageError when there is none to monitor.
ServiceState release_in_service(const ReleaseRegistry& registry, const std::string& registry_dir) {
  std::optional<ServiceState> state = registry.in_service();
  if (!state)
    throw UsageError(registry_dir + ": no release in service (no last-known-good) to monitor; promote one with "
                     "release-gate decide first");
  // A baseline in service is a fallback, not a release: there is nothing behind it to roll back to,
  // and its n-gram has no release-time interval of its own to hold matured data against.
  if (state->baseline)
    throw UsageError(registry_dir + ": baseline '" + state->pointer.baseline->name + "' is in service (put back by " +
                     state->pointer.rollback.value_or("?") + "), and the monitor scores releases only; promote a "
                     "release over it with release-gate decide --baseline last-known-good, then monitor that");
  return std::move(*state);
}

// The input-quality evidence: the matured documents' tokens against the release's training selection.
struct InputTokens {
  TokenCounts matured, training;
  double drift = 0;
  std::optional<data::DataPrepResult> prep;
};

InputTokens read_input_tokens(const MonitorOptions& o, const ReleaseRecord& current, const std::string& since) {
  InputTokens in;
  in.matured = selection_token_counts(o.data_path, since, true);
  if (in.matured.documents == 0)
    throw UsageError(o.data_path + ": no document matured after " + since + " (every document there happened by "
                     "then), so the release in service cannot be scored; monitor again with a newer snapshot, or "
                     "give an earlier --since");
  in.training = selection_token_counts(current.data.dataset, current.data.training_cutoff, false);
  if (in.training.documents == 0)
    throw UsageError(current.data.dataset + ": the release's training selection (available by " +
                     current.data.training_cutoff + ") has no document; is this the file it was released with?");
  in.drift = jensen_shannon_divergence(in.matured.counts, in.training.counts);
  if (!o.data_prep_summary.empty())
    in.prep =
        data::DataPrepResult::from_json(JsonFile::read(o.data_prep_summary, "the data-prep summary (--data-prep)"));
  return in;
}

// The release's checkpoint scored on the documents matured after `since`, by exact version.
CheckpointEvaluation score_matured(const MonitorOptions& o, const ReleaseRecord& current, const std::string& since) {
  ReleaseEvalOptions eval = o.eval;
  eval.holdout.data_path = o.data_path;
  eval.holdout.cutoff = since;
  eval.holdout.max_samples = o.max_samples.value_or(current.candidate.holdout.max_samples);
  if (!fs::exists(current.artifact.folder))
    throw IoError(current.artifact.folder + ": the checkpoint of the release in service (" + current.record_path +
                  ") is gone; restore it, or roll back by hand with --rollback-to");
  log_line("release-gate monitor: scoring " + current.record_path + " on the documents of " + o.data_path +
           " after " + since);
  CheckpointEvaluation matured = evaluate_checkpoint(current.artifact.folder, eval);
  if (matured.checkpoint.manifest_sha256 != current.artifact.manifest_sha256)
    throw UsageError(current.artifact.folder + ": its manifest sha256 " + matured.checkpoint.manifest_sha256 +
                     " is not the release's " + current.artifact.manifest_sha256 +
                     " (the folder was rewritten): the release in service cannot be scored by exact version");
  matured.scores.per_sequence.reset();
  return matured;
}

// The monitoring record, its checks scored under the policy; verdict, time and path not yet set.
MonitoringRecord monitoring_record(const MonitorOptions& o, const ReleasePolicy& policy, const ReleaseRecord& current,
                                   const std::string& since, CheckpointEvaluation matured, const InputTokens& in) {
  MonitoringRecord m;
  m.release = {{current.record_path, current.artifact.folder, current.artifact.manifest_sha256},
               current.artifact.step,
               current.candidate.checkpoint.data_snapshot_id,
               current.data.training_cutoff,
               current.data.cutoff,
               current.policy.version,
               current.policy.sha256};
  m.since = since;
  m.matured = std::move(matured);
  m.release_time = current.candidate.scores;
  m.release_time.per_sequence.reset();
  m.input_quality.drift_jsd_bits = in.drift;
  m.input_quality.training_data = current.data.dataset;
  m.input_quality.training_cutoff = current.data.training_cutoff;
  m.input_quality.training_documents = in.training.documents;
  m.input_quality.training_tokens = in.training.tokens;
  m.input_quality.matured_documents = in.matured.documents;
  m.input_quality.matured_tokens = in.matured.tokens;
  if (in.prep) {
    m.input_quality.rejected_records = in.prep->rejects;
    m.input_quality.not_yet_available = in.prep->not_yet_available;
  }
  m.checks = rollback_checks(*policy.rollback, m.release_time, m.matured.scores, in.drift);
  m.policy_path = policy.path;
  m.policy_version = policy.version;
  m.policy_sha256 = policy.sha256;
  m.run_dir = o.run_dir;
  m.release_gate_version = code_version();
  return m;
}

// The rollback record of a written monitoring record whose checks failed; time and path not yet set.
RollbackRecord rollback_record(const MonitoringRecord& m, const RollbackTarget& target, const ReleasePolicy& policy,
                               const std::string& run_dir) {
  RollbackRecord b;
  b.from = m.release.release;
  if (target.release) b.to = ReleaseRef{target.release->record_path, target.release->artifact.folder,
                                        target.release->artifact.manifest_sha256};
  b.to_baseline = target.baseline;
  b.to_reason = target.reason;
  b.monitoring_record = m.record_path;
  for (const auto& c : m.checks)
    if (!c.passed) {
      b.reasons.push_back(c.name + ": " + c.reason);
      b.evidence.push_back(c);
    }
  b.slices = regressed_slices(m.checks);
  b.policy_version = policy.version;
  b.policy_sha256 = policy.sha256;
  b.review = ReviewNeed::of(policy.review.rollback_minutes);
  b.run_dir = run_dir;
  b.release_gate_version = code_version();
  return b;
}

}  // namespace

MonitorResult monitor_release(const MonitorOptions& o) {
  const ReleasePolicy policy = read_rollback_policy(o.policy_path);
  // Read-only: a monitor that cannot score creates nothing (its records' folders are made when written).
  const ReleaseRegistry registry(o.registry, true);
  const ServiceState state = release_in_service(registry, o.registry);
  const ReleaseRecord& current = *state.release;
  // Where a failing release would go, resolved before scoring: a bad name costs no scoring and writes nothing.
  const std::optional<RollbackTarget> target_if_needed =
      rollback_target(registry, current, o.rollback_to, *policy.rollback);
  if (o.data_path.empty()) throw UsageError("--data: name the new snapshot (a data-prep dataset)");
  const std::string since = o.since.empty() ? current.data.cutoff : o.since;
  (void)parse_rfc3339(since, "--since");

  // Input quality first: it needs no model, and a snapshot without matured documents stops here.
  const InputTokens inputs = read_input_tokens(o, current, since);
  MonitorResult result;
  result.record = monitoring_record(o, policy, current, since, score_matured(o, current, since), inputs);
  MonitoringRecord& m = result.record;

  const bool go = must_roll_back(m.checks);
  // The target is resolved before anything is written: a bad --rollback-to leaves the registry as it was.
  const std::optional<RollbackTarget> target = go ? target_if_needed : std::nullopt;
  m.verdict = !go ? kVerdictKeep : target ? kVerdictRolledBack : kVerdictRollbackBlocked;
  m.monitored = now_rfc3339();
  m.record_path = registry.write_monitoring(m);
  if (!target) return result;

  RollbackRecord b = rollback_record(m, *target, policy, o.run_dir);
  b.rolled_back = now_rfc3339();
  b.record_path = registry.write_rollback(b);  // durable before the pointer moves
  registry.roll_back(b.record_path, b);
  result.rollback = b;
  return result;
}

std::string monitoring_text(const MonitorResult& result) {
  const MonitoringRecord& m = result.record;
  const HoldoutSummary& now = m.matured.scores;
  const HoldoutSummary& then = m.release_time;
  std::ostringstream s;
  s << "monitor: " << m.release.release.record << " (step " << m.release.step << ", manifest "
    << m.release.release.manifest_sha256.substr(0, 12) << ", cutoff "
    << (m.release.training_cutoff.empty() ? "none" : m.release.training_cutoff) << ", policy "
    << m.release.policy_version << ")\n";
  s << "  matured: " << m.input_quality.matured_documents << " documents after " << m.since << " in "
    << m.matured.holdout.data << " (" << now.tokens << " positions scored)\n";
  s << "  loss: matured " << interval_text(now.loss, now.interval.lower, now.interval.upper) << ", at release "
    << interval_text(then.loss, then.interval.lower, then.interval.upper) << "\n";
  for (const auto& slice : now.slices) {
    const SliceScore* r = find_slice(then, slice.key);
    s << "  slice " << slice.key << ": matured " << interval_text(slice.loss, slice.lower, slice.upper)
      << ", at release " << (r ? interval_text(r->loss, r->lower, r->upper) : std::string("none")) << "\n";
  }
  s << "  input: drift " << num(m.input_quality.drift_jsd_bits, 5) << " bits (Jensen-Shannon, "
    << m.input_quality.matured_tokens << " matured tokens against " << m.input_quality.training_tokens
    << " trained on); rejected records "
    << (m.input_quality.rejected_records ? std::to_string(*m.input_quality.rejected_records) : std::string("unknown"))
    << "\n";
  s << "  predictions: ECE " << num(now.calibration.ece) << " (at release " << num(then.calibration.ece) << "), top-1 "
    << num(now.calibration.top1_accuracy) << "\n";
  s << "  service: latency p50 " << num(m.matured.latency.ms_per_sequence_p50, 3) << " ms, p99 "
    << num(m.matured.latency.ms_per_sequence_p99, 3) << " ms per sequence (measured here)\n";
  for (const auto& c : m.checks)
    if (!c.passed) s << "  reason: " << c.name << ": " << c.reason << "\n";
  s << "verdict: " << m.verdict << "\n";
  if (result.rollback)
    s << "  rolled back: " << result.rollback->from.record << " -> " << result.rollback->to_name() << " ("
      << result.rollback->to_reason << "); " << result.rollback->record_path << "\n";
  else if (m.verdict == kVerdictRollbackBlocked)
    s << "  the release must go, but there is no previous known-good to put back and no baseline named: name one "
         "with --rollback-to records/<...>.json or baseline:NAME, or give the policy a rollback.fallback_baseline "
         "(release-gate history lists them)\n";
  s << "  record: " << m.record_path << "\n";
  return s.str();
}

}  // namespace shardtrain::release_gate
