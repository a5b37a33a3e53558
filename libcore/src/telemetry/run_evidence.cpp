#include "shardtrain/telemetry/run_evidence.hpp"

#include <utility>

namespace shardtrain::run_evidence {
namespace {

// The rubric's items in the table's order (decision/evidence.hpp), each with its file.
constexpr std::pair<const char*, const char*> kItems[] = {{"deterministic_twin", kEquivalence},
                                                          {"kill_resume", kKillResume},
                                                          {"efficiency_report", kScalingReport},
                                                          {"replica_checks", kRunSummary},
                                                          {"no_skipped_data", kDataPrep}};

}  // namespace

std::string path_of_item(const std::string& item) {
  for (const auto& [name, path] : kItems)
    if (item == name) return path;
  return "";
}

std::string known_items() {
  std::string known;
  for (const auto& [name, path] : kItems) known += (known.empty() ? "" : ", ") + std::string(name);
  return known;
}

}  // namespace shardtrain::run_evidence
