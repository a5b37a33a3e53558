#include "shardtrain/decision/evidence.hpp"

#include <filesystem>
#include <fstream>
#include <utility>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/data/data_prep.hpp"
#include "shardtrain/train/run_summary.hpp"
#include "shardtrain/telemetry/run_evidence.hpp"

namespace shardtrain {
namespace {

struct Outcome {
  bool passed;
  std::string detail;
};

// Each item's rule (the table in the header), on its file as read by the format's one reader:
// the run summary and data-prep's summary through their typed readers; the equivalence verdict,
// the proof report and the scaling report, whose only reader in the library this is, through
// JsonFile. A file that cannot be read throws (Error), which fails the item naming why.
Outcome judge(const std::string& item, const std::string& path, const std::string& dataset_snapshot_id) {
  if (item == "replica_checks") {
    // One rank has no replica to compare with: its checks pass trivially and prove nothing.
    const RunSummary summary = read_run_summary(path, "the replica_checks evidence (the run summary)");
    const ReplicaChecks& rc = summary.replica_checks;
    const int world = summary.world_size;
    if (!(rc.every > 0 && rc.checks >= 1)) return {false, "the run did not check its replicas (--check-replicas)"};
    if (world < 2) return {false, "the run had " + std::to_string(world) + " rank(s): no replica to compare"};
    return {true, std::to_string(rc.checks) + " checks of " + std::to_string(world) + " replicas, every " +
                      std::to_string(rc.every) + " steps"};
  }
  if (item == "no_skipped_data") {
    const data::DataPrepResult prep = data::DataPrepResult::from_json(JsonFile::read(path, "the no_skipped_data evidence"));
    if (prep.snapshot_id != dataset_snapshot_id)
      return {false, "its snapshot_id " + prep.snapshot_id.substr(0, 12) + " is not the evaluated dataset's " +
                         dataset_snapshot_id.substr(0, 12)};
    return {prep.rejects == 0, std::to_string(prep.rejects) + " rejected input lines"};
  }
  const JsonFile file = JsonFile::read(path, "the " + item + " evidence");
  const nlohmann::json& j = file.json();
  if (item == "deterministic_twin") {
    const std::string v = j.value("verdict", "");
    return {v == "BITWISE" || v == "WITHIN", "verdict " + (v.empty() ? std::string("missing") : v)};
  }
  if (item == "kill_resume") {
    const std::string proof = j.value("proof", "");
    return {proof == "holds", "proof " + (proof.empty() ? std::string("missing") : proof)};
  }
  // efficiency_report: E(W) at some W > 1. A report of the W=1 run alone has efficiency_available
  // (its base) but measures no scaling, and a report without a W=1 run has no E(W) at all.
  if (!j.value("efficiency_available", false)) return {false, "no W=1 run in the report: no E(W)"};
  int scaled = 0, oversubscribed = 0;
  if (j.contains("points") && j["points"].is_array())
    for (const auto& p : j["points"])
      if (p.is_object() && p.value("world_size", 0) > 1 && p.contains("efficiency") && p["efficiency"].is_number()) {
        ++scaled;
        oversubscribed += p.value("oversubscribed", false);
      }
  if (scaled == 0) return {false, "no point with W > 1: no E(W) measured"};
  return {true, std::to_string(scaled) + " E(W) points at W > 1" +
                    (oversubscribed ? " (" + std::to_string(oversubscribed) + " oversubscribed)" : "")};
}

}  // namespace

std::string default_evidence_path(const std::string& item) {
  const std::string path = run_evidence::path_of_item(item);
  if (path.empty()) throw UsageError("unknown evidence item '" + item + "' (known: " + run_evidence::known_items() + ")");
  return path;
}

std::vector<EvidenceResult> collect_evidence(const ReleasePolicy& policy, const std::string& run_dir,
                                             const std::map<std::string, std::string>& given,
                                             const std::string& dataset_snapshot_id) {
  for (const auto& [item, path] : given) (void)default_evidence_path(item);  // names an unknown item
  std::vector<EvidenceResult> results;
  for (const auto& ri : policy.rubric) {
    EvidenceResult e;
    e.item = ri.name;
    const auto it = given.find(ri.name);
    e.path = it != given.end() ? it->second : (std::filesystem::path(run_dir) / default_evidence_path(ri.name)).string();
    e.found = std::filesystem::exists(e.path);
    if (!e.found) {
      e.detail = "no such file";
    } else {
      try {  // unreadable evidence fails its item (naming why); it does not stop the decision
        const Outcome o = judge(ri.name, e.path, dataset_snapshot_id);
        e.passed = o.passed;
        e.detail = o.detail;
      } catch (const Error& ex) {
        e.detail = std::string("unreadable: ") + ex.what();
      } catch (const nlohmann::json::exception& ex) {
        e.detail = std::string("unreadable: ") + ex.what();
      }
    }
    results.push_back(e);
  }
  return results;
}

}  // namespace shardtrain
