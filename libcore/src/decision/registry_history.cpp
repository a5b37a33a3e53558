// The registry's history and its table (registry_history.hpp).
#include "shardtrain/decision/registry_history.hpp"

#include <algorithm>
#include <cstdio>

#include "shardtrain/decision/registry_time.hpp"

namespace shardtrain {

nlohmann::json HistoryEntry::to_json() const { return release ? release->to_json() : rollback->to_json(); }

std::vector<HistoryEntry> registry_history(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks) {
  std::vector<HistoryEntry> out;
  for (const auto& r : records) out.push_back({registry_stamp_rfc3339(r.record_path), r, std::nullopt});
  for (const auto& b : rollbacks) out.push_back({registry_stamp_rfc3339(b.record_path), std::nullopt, b});
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

}  // namespace shardtrain
