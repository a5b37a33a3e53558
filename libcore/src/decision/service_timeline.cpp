// What was in service when (service_timeline.hpp).
#include "shardtrain/decision/service_timeline.hpp"

#include <algorithm>

#include "decision/score_text.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/decision/registry_time.hpp"

namespace shardtrain {

using score_text::interval_text;

std::string ServiceEvent::in_service_name() const {
  return baseline ? "baseline " + baseline->name : record.value_or("nothing");
}

std::vector<ServiceEvent> service_timeline(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks) {
  std::vector<ServiceEvent> events;
  for (const auto& r : records) {
    if (!r.promote || r.dry_run) continue;
    std::string why = "promoted by " + r.record_path + " over " + r.baseline.name + ": hold-out loss " +
                      interval_text(r.candidate.scores.loss, r.candidate.scores.interval.lower,
                                    r.candidate.scores.interval.upper);
    events.push_back({registry_stamp_rfc3339(r.record_path), r.record_path, r.artifact.folder, std::nullopt, r.record_path, why});
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
    ServiceEvent e{registry_stamp_rfc3339(b.record_path), std::nullopt, std::nullopt, b.to_baseline, b.record_path, why};
    if (b.to) e.record = b.to->record, e.checkpoint = b.to->checkpoint;
    events.push_back(std::move(e));
  }
  // The stamps are fixed-width UTC, so their text order is their time order.
  std::stable_sort(events.begin(), events.end(),
                   [](const ServiceEvent& a, const ServiceEvent& b) { return a.effective < b.effective; });
  return events;
}

std::optional<ServiceEvent> in_service_at(const std::vector<ServiceEvent>& timeline, std::int64_t at_micros) {
  std::optional<ServiceEvent> current;
  for (const auto& e : timeline) {
    if (rfc3339_micros(e.effective, "a registry time") > at_micros) break;
    current = e;
  }
  return current;
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
