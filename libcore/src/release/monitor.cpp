#include "shardtrain/release/monitor.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/log.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/data/dataset.hpp"
#include "shardtrain/data/selection.hpp"
#include "shardtrain/release/registry.hpp"

namespace shardtrain {
namespace {

constexpr const char* kSlicePrefix = "slice_regression:";
constexpr const char* kRolledBackPrefix = "rolled_back_slice:";

std::string num(double v, int precision = 4) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", precision, v);
  return b;
}

std::string interval_text(double loss, double lower, double upper) {
  return num(loss) + " [" + num(lower) + ", " + num(upper) + "]";
}

double entropy_bits(const std::vector<double>& p) {
  double h = 0;
  for (const double x : p)
    if (x > 0) h -= x * std::log2(x);
  return h;
}

std::vector<double> normalised(const std::vector<double>& counts, const char* which) {
  double total = 0;
  for (const double c : counts) {
    if (!(c >= 0) || !std::isfinite(c))
      throw UsageError(std::string("Jensen-Shannon divergence: a count of ") + which + " is negative or not finite");
    total += c;
  }
  if (!(total > 0)) throw UsageError(std::string("Jensen-Shannon divergence: ") + which + " has no count (sums to 0)");
  std::vector<double> p(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) p[i] = counts[i] / total;
  return p;
}

const SliceScore* find_slice(const HoldoutSummary& s, const std::string& key) {
  for (const auto& slice : s.slices)
    if (slice.key == key) return &slice;
  return nullptr;
}

// "records/20261204T194532.123456Z-..." -> "2026-12-04T19:45:32.123456Z"
std::string stamp_of(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const bool ok = name.size() >= 23 && name[8] == 'T' && name[15] == '.' && name[22] == 'Z' &&
                  std::all_of(name.begin(), name.begin() + 8, ::isdigit) &&
                  std::all_of(name.begin() + 9, name.begin() + 15, ::isdigit) &&
                  std::all_of(name.begin() + 16, name.begin() + 22, ::isdigit);
  if (!ok) throw UsageError("'" + path + "' is not a registry file name (<YYYYMMDDTHHMMSS.ffffffZ>-...)");
  return name.substr(0, 4) + "-" + name.substr(4, 2) + "-" + name.substr(6, 2) + "T" + name.substr(9, 2) + ":" +
         name.substr(11, 2) + ":" + name.substr(13, 2) + name.substr(15, 8);
}

}  // namespace

double jensen_shannon_divergence(const std::vector<double>& p_counts, const std::vector<double>& q_counts) {
  if (p_counts.size() != q_counts.size())
    throw UsageError("Jensen-Shannon divergence: the distributions have " + std::to_string(p_counts.size()) + " and " +
                     std::to_string(q_counts.size()) + " classes");
  const std::vector<double> p = normalised(p_counts, "the first distribution"),
                            q = normalised(q_counts, "the second distribution");
  std::vector<double> m(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) m[i] = 0.5 * (p[i] + q[i]);
  // Clamped: rounding can leave a value a few ulps outside [0, 1].
  return std::clamp(entropy_bits(m) - 0.5 * (entropy_bits(p) + entropy_bits(q)), 0.0, 1.0);
}

TokenCounts selection_token_counts(const std::string& data_path, const std::string& cutoff, bool holdout) {
  if (!std::filesystem::exists(data_path))
    throw IoError(data_path + ": no such dataset (prepare it with data-prep, or name the right file)");
  const auto reader = data::DatasetReader::open(data_path);
  std::optional<std::int64_t> c;
  if (!cutoff.empty()) c = parse_rfc3339(cutoff, "cutoff");
  const data::Selection s = data::select_documents(reader.documents(), c, c);
  TokenCounts out;
  out.counts.assign(std::size_t(reader.header().vocab), 0.0);
  for (const std::size_t index : holdout ? s.holdout : s.train) {
    for (const std::uint32_t t : reader.read_document(index)) out.counts[t] += 1;
    out.tokens += reader.documents()[index].length;
    ++out.documents;
  }
  return out;
}

std::vector<CheckResult> rollback_checks(const RollbackRules& rules, const HoldoutSummary& release_time,
                                         const HoldoutSummary& matured, double drift_jsd_bits) {
  std::vector<CheckResult> checks;
  {
    const double limit = release_time.interval.upper + rules.max_matured_loss_excess;
    const bool passed = !(matured.interval.lower > limit);
    checks.push_back({"matured_loss", passed, true, matured.interval.lower, limit,
                      passed ? ""
                             : "the matured loss " + interval_text(matured.loss, matured.interval.lower, matured.interval.upper) +
                                   " is worse than the release-time interval " +
                                   interval_text(release_time.loss, release_time.interval.lower, release_time.interval.upper) +
                                   " by more than " + num(rules.max_matured_loss_excess) + " nats beyond both"});
  }
  for (const auto& m : matured.slices) {
    const SliceScore* r = find_slice(release_time, m.key);
    if (!r) {
      checks.push_back({kSlicePrefix + m.key, true, false, m.lower, std::monostate{},
                        "no release-time estimate of this slice (it has matured documents only now)"});
      continue;
    }
    const double limit = r->upper + rules.max_slice_regression;
    const bool passed = !(m.lower > limit);
    checks.push_back({kSlicePrefix + m.key, passed, true, m.lower, limit,
                      passed ? ""
                             : m.key + " matured at " + interval_text(m.loss, m.lower, m.upper) + " against " +
                                   interval_text(r->loss, r->lower, r->upper) + " at release: worse by more than " +
                                   num(rules.max_slice_regression) + " nats beyond both intervals"});
  }
  const bool passed = !(drift_jsd_bits > rules.max_drift_jsd);
  checks.push_back({"drift", passed, true, drift_jsd_bits, rules.max_drift_jsd,
                    passed ? ""
                           : "the matured tokens diverge from the training selection's by " + num(drift_jsd_bits) +
                                 " bits (Jensen-Shannon), above " + num(rules.max_drift_jsd)});
  return checks;
}

bool must_roll_back(const std::vector<CheckResult>& checks) {
  return std::any_of(checks.begin(), checks.end(), [](const CheckResult& c) { return !c.passed; });
}

std::vector<std::string> regressed_slices(const std::vector<CheckResult>& checks) {
  std::vector<std::string> keys;
  const std::string prefix = kSlicePrefix;
  for (const auto& c : checks)
    if (!c.passed && c.name.rfind(prefix, 0) == 0) keys.push_back(c.name.substr(prefix.size()));
  return keys;
}

std::vector<CheckResult> rolled_back_slice_checks(const RollbackRecord& standing, const HoldoutSummary& candidate,
                                                  const HoldoutSummary& in_service_release_time,
                                                  double max_slice_regression, const std::string& reference) {
  std::vector<CheckResult> checks;
  for (const auto& key : standing.slices) {
    const SliceScore* c = find_slice(candidate, key);
    const SliceScore* r = find_slice(in_service_release_time, key);
    const std::string name = kRolledBackPrefix + key;
    if (!c || !r) {
      checks.push_back({name, true, false, std::monostate{}, std::monostate{},
                        std::string(c ? "the release in service has no release-time estimate of " : "the hold-out has no position of ") +
                            key + ", so the decision cannot show whether the slice recovered"});
      continue;
    }
    const double limit = r->upper + max_slice_regression;
    const bool passed = !(c->lower > limit);
    checks.push_back({name, passed, true, c->lower, limit,
                      passed ? ""
                             : key + " rolled back " + standing.from.record + " (" + standing.record_path +
                                   "); the candidate's " + key + " loss " + interval_text(c->loss, c->lower, c->upper) +
                                   " is still above " + reference + " release-time " +
                                   interval_text(r->loss, r->lower, r->upper) + " + " + num(max_slice_regression) +
                                   ": it cannot promote on this slice until the slice is back within it"});
  }
  return checks;
}

nlohmann::json ServiceEvent::to_json() const {
  return {{"effective", effective},
          {"record", json_fields::or_null(record)},
          {"checkpoint", json_fields::or_null(checkpoint)},
          {"baseline", baseline ? baseline->to_json() : nlohmann::json(nullptr)},
          {"cause", cause},
          {"why", why}};
}

std::string ServiceEvent::in_service_name() const {
  return baseline ? "baseline " + baseline->name : record.value_or("nothing");
}

std::string registry_stamp_rfc3339(const std::string& record_path) { return stamp_of(record_path); }

std::int64_t registry_stamp_seconds(const std::string& record_path) {
  return parse_rfc3339(stamp_of(record_path), record_path);
}

std::vector<ServiceEvent> service_timeline(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks) {
  std::vector<ServiceEvent> events;
  for (const auto& r : records) {
    if (!r.promote || r.dry_run) continue;
    std::string why = "promoted by " + r.record_path + " over " + r.baseline.name + ": hold-out loss " +
                      interval_text(r.candidate.scores.loss, r.candidate.scores.interval.lower,
                                    r.candidate.scores.interval.upper);
    events.push_back({stamp_of(r.record_path), r.record_path, r.artifact.folder, std::nullopt, r.record_path, why});
  }
  for (const auto& b : rollbacks) {
    std::string why = "rolled back from " + b.from.record + " by " + b.record_path;
    if (!b.reasons.empty()) why += ": " + b.reasons.front();
    if (b.reasons.size() > 1) {  // the others by their check's name: every rule that failed is named
      why += " (and " + std::to_string(b.reasons.size() - 1) + " more:";
      for (std::size_t i = 1; i < b.reasons.size(); ++i)
        why += (i > 1 ? ", " : " ") + b.reasons[i].substr(0, b.reasons[i].find(": "));
      why += ")";
    }
    ServiceEvent e{stamp_of(b.record_path), std::nullopt, std::nullopt, b.to_baseline, b.record_path, why};
    if (b.to) e.record = b.to->record, e.checkpoint = b.to->checkpoint;
    events.push_back(std::move(e));
  }
  // The stamps are fixed-width UTC, so their text order is their time order.
  std::stable_sort(events.begin(), events.end(),
                   [](const ServiceEvent& a, const ServiceEvent& b) { return a.effective < b.effective; });
  return events;
}

std::int64_t rfc3339_micros(const std::string& text, const std::string& what) {
  const std::int64_t seconds = parse_rfc3339(text, what);  // validates the whole text
  std::int64_t micros = 0;
  const auto dot = text.find('.');
  if (dot != std::string::npos) {
    int digits = 0;
    for (std::size_t i = dot + 1; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
      if (digits < 6) micros = micros * 10 + (text[i] - '0'), ++digits;
    for (; digits < 6; ++digits) micros *= 10;
  }
  // A time before 1970 truncates toward the earlier second: its fraction still counts upward from it.
  return seconds * 1000000 + micros;
}

std::optional<ServiceEvent> in_service_at(const std::vector<ServiceEvent>& timeline, std::int64_t at_micros) {
  std::optional<ServiceEvent> current;
  for (const auto& e : timeline) {
    if (rfc3339_micros(e.effective, "a registry time") > at_micros) break;
    current = e;
  }
  return current;
}

nlohmann::json HistoryEntry::to_json() const { return release ? release->to_json() : rollback->to_json(); }

std::vector<HistoryEntry> registry_history(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks) {
  std::vector<HistoryEntry> out;
  for (const auto& r : records) out.push_back({stamp_of(r.record_path), r, std::nullopt});
  for (const auto& b : rollbacks) out.push_back({stamp_of(b.record_path), std::nullopt, b});
  // Fixed-width UTC stamps: text order is time order; stable, so records stay before rollbacks on a tie.
  std::stable_sort(out.begin(), out.end(), [](const HistoryEntry& a, const HistoryEntry& b) { return a.effective < b.effective; });
  return out;
}

std::string history_text(const std::vector<HistoryEntry>& entries, const std::optional<ServiceState>& now,
                         const std::vector<std::string>& baseline_names) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-27s  %-8s  %-56s  %-9s  %-16s  %s\n", "time", "decision", "record", "loss", "baseline",
                "first reason");
  s += line;
  const std::string lkg = now && now->release ? now->release->record_path : "";
  for (const auto& e : entries) {
    if (e.release) {
      const ReleaseRecord& r = *e.release;
      std::snprintf(line, sizeof line, "%-27s  %-8s  %-56s  %-9.4f  %-16s  %s%s\n", e.effective.c_str(),
                    r.promote ? (r.dry_run ? "dry-run" : "promote") : "reject", r.record_path.c_str(),
                    r.candidate.scores.loss, r.baseline.name.c_str(),
                    r.reasons.empty() ? "" : r.reasons[0].substr(0, 100).c_str(),
                    lkg == r.record_path ? "  <- last-known-good" : "");
    } else {
      const RollbackRecord& b = *e.rollback;
      std::snprintf(line, sizeof line, "%-27s  %-8s  %-56s  %-9s  %-16s  %s\n", e.effective.c_str(), "rollback",
                    b.record_path.c_str(), "-", "-",
                    (b.from.record + " -> " + b.to_name() + (b.reasons.empty() ? "" : ": " + b.reasons[0])).substr(0, 160).c_str());
    }
    s += line;
  }
  std::string names;
  for (const auto& n : baseline_names) names += (names.empty() ? "" : ", ") + n;
  s += "baselines: " + (names.empty() ? std::string("none") : names) + "\n";
  if (now && now->pointer.baseline)
    s += "last-known-good: baseline " + now->pointer.baseline->name + " (" + now->pointer.baseline->model_file +
         ", sha256 " + now->pointer.baseline->sha256.substr(0, 12) + "; put back by " +
         now->pointer.rollback.value_or("?") + ")\n";
  else
    s += "last-known-good: " + (lkg.empty() ? std::string("none") : lkg) + "\n";
  return s;
}

std::string in_service_at_text(const std::string& at, const std::optional<ServiceEvent>& event) {
  if (!event) return "in service at " + at + ": nothing (no release had been promoted by then)\n";
  std::string what;
  if (event->baseline)
    what = "baseline " + event->baseline->name + " (" + event->baseline->model_file + ", sha256 " +
           event->baseline->sha256.substr(0, 12) + ")";
  else
    what = event->record.value_or("?") + " (checkpoint " + event->checkpoint.value_or("?") + ")";
  return "in service at " + at + ": " + what + " since " + event->effective + "\n  why: " + event->why + "\n";
}

std::optional<RollbackRecord> standing_rollback(const std::vector<ReleaseRecord>& records,
                                                const std::vector<RollbackRecord>& rollbacks) {
  const auto timeline = service_timeline(records, rollbacks);
  if (timeline.empty()) return std::nullopt;
  for (const auto& b : rollbacks)
    if (b.record_path == timeline.back().cause) return b;
  return std::nullopt;
}

}  // namespace shardtrain

namespace shardtrain::release_gate {
namespace fs = std::filesystem;
namespace {

std::string registered_names(const ReleaseRegistry& registry) {
  std::string names;
  for (const auto& n : registry.baseline_names()) names += (names.empty() ? "" : ", ") + n;
  return names.empty() ? "none" : names;
}

// A registered baseline as a rollback target; `what` names where the name came from.
ServedBaseline target_baseline(const ReleaseRegistry& registry, const std::string& name, const std::string& what) {
  const auto names = registry.baseline_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw UsageError(what + ": no baseline '" + name + "' in " + registry.dir() + " (registered: " +
                     registered_names(registry) + "); register it with release-gate baseline NAME, or name another");
  return registry.served_baseline(name);
}

}  // namespace

std::optional<RollbackTarget> rollback_target(const ReleaseRegistry& registry, const ReleaseRecord& current,
                                              const std::string& given, const RollbackRules& rules) {
  if (given.rfind(kRollbackToBaselinePrefix, 0) == 0) {
    const std::string name = given.substr(std::string(kRollbackToBaselinePrefix).size());
    return RollbackTarget{std::nullopt, target_baseline(registry, name, "--rollback-to " + given), "--rollback-to " + given};
  }
  if (!given.empty()) {
    ReleaseRecord r = registry.record(given);
    if (!r.promote || r.dry_run)
      throw UsageError("--rollback-to " + given + ": that release was never promoted (decision " +
                       (r.promote ? "promote, dry run" : "reject") + "); name a release that was in service");
    if (r.record_path == current.record_path)
      throw UsageError("--rollback-to " + given + " is the release being rolled back");
    return RollbackTarget{std::move(r), std::nullopt, "--rollback-to " + given};
  }
  if (current.previous_last_known_good)
    return RollbackTarget{registry.record(*current.previous_last_known_good), std::nullopt,
                          "the previous known-good of " + current.record_path};
  // The first release (nothing was in service before it): the baseline the policy names, if any.
  if (rules.fallback_baseline)
    return RollbackTarget{std::nullopt,
                          target_baseline(registry, *rules.fallback_baseline,
                                          "the policy's rollback.fallback_baseline"),
                          "the policy's rollback.fallback_baseline (no previous known-good of " + current.record_path + ")"};
  return std::nullopt;
}

namespace {

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
