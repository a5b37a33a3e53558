// `release-gate history`: every release record and rollback record of the registry, in the order
// of the times in their file names (registry_time.hpp), and the table it prints. Pure.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/decision/monitoring_record.hpp"
#include "shardtrain/decision/record.hpp"
#include "shardtrain/decision/registry.hpp"

namespace shardtrain {

// One line of `release-gate history`: a release record (a decision) or a rollback record, at the
// time in its file name.
struct HistoryEntry {
  std::string effective;  // RFC 3339 (microseconds)
  std::optional<ReleaseRecord> release;    // exactly one of the two
  std::optional<RollbackRecord> rollback;
  // The record's own JSON (its "format" says which kind), with "record_path".
  nlohmann::json to_json() const;
};
// Every release record and rollback record, oldest first (by the time in their file names; a
// record and a rollback in the same microsecond: the record first). Pure.
std::vector<HistoryEntry> registry_history(const std::vector<ReleaseRecord>& records,
                                           const std::vector<RollbackRecord>& rollbacks);
// history's table: one row per entry, the baselines, and what is in service now.
std::string history_text(const std::vector<HistoryEntry>& entries, const std::optional<ServiceState>& now,
                         const std::vector<std::string>& baseline_names);

}  // namespace shardtrain
