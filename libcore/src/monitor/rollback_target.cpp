// Where a release that must go is put back (rollback_target.hpp).
#include "shardtrain/monitor/rollback_target.hpp"

#include <algorithm>

#include "shardtrain/base/error.hpp"

namespace shardtrain::release_gate {
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

}  // namespace shardtrain::release_gate
