// Where a release that must go is put back: a release named by --rollback-to, the previous
// known-good, or a registered baseline (the policy's rollback.fallback_baseline). The monitor
// (monitor.hpp) resolves it before it scores; the rollback record keeps how it was chosen.
#pragma once
#include <optional>
#include <string>

#include "shardtrain/decision/monitoring_record.hpp"
#include "shardtrain/decision/policy.hpp"
#include "shardtrain/decision/record.hpp"
#include "shardtrain/decision/registry.hpp"

namespace shardtrain::release_gate {

// Where a release that must go is put back, in this order:
//   1. `rollback_to`: "records/<...>.json" (a release that was promoted, not `current`) or
//      "baseline:NAME" (a registered baseline);
//   2. the previous known-good of `current` (its record's previous_last_known_good);
//   3. the policy's rollback.fallback_baseline (RollbackRules), a registered baseline;
//   4. nowhere: nullopt (the monitor records rollback_blocked).
// A name that does not exist (a record, a baseline: the registered ones are listed) throws
// UsageError; the monitor resolves this before it scores, so such a run writes nothing.
struct RollbackTarget {
  std::optional<ReleaseRecord> release;    // exactly one of release and baseline
  std::optional<ServedBaseline> baseline;
  std::string reason;                      // how it was chosen (the rollback record's to_reason)
};
inline constexpr const char* kRollbackToBaselinePrefix = "baseline:";
std::optional<RollbackTarget> rollback_target(const ReleaseRegistry& registry, const ReleaseRecord& current,
                                              const std::string& rollback_to, const RollbackRules& rules);

}  // namespace shardtrain::release_gate
