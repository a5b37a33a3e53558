// release-gate's decisions: register a named n-gram baseline, and decide on a candidate checkpoint
// (evaluate it, compare it with a baseline under a policy, score the evidence rubric, write the
// release record and move `last-known-good` on promotion). The record's fields are listed in
// docs/FORMATS.md ("Release record").
#pragma once
#include <map>
#include <optional>
#include <string>

#include "shardtrain/decision/baseline.hpp"
#include "shardtrain/releaseeval/evaluation.hpp"
#include "shardtrain/decision/record.hpp"

namespace shardtrain::release_gate {

inline constexpr const char* kLastKnownGood = "last-known-good";

struct BaselineOptions {
  std::string name, registry;
  HoldoutPlan plan;  // data, cutoff (train selection = available by it; hold-out = after it), seq_len, max_samples
  int order = 2;
};
// Fits, evaluates and registers the baseline (<registry>/baselines/<name>.json and .h5); returns it.
// UsageError, before any work, when a baseline of that name is in service (a rollback put it back).
BaselineRecord register_baseline(const BaselineOptions& options);

struct DecideOptions {
  std::string checkpoint, policy_path, baseline = kLastKnownGood, registry;
  ReleaseEvalOptions eval;                 // holdout data/cutoff/max_samples: empty/unset = the baseline's
  std::optional<int> max_samples;
  std::string run_dir;                     // evidence folder; "" = <step folder>/../..
  std::map<std::string, std::string> evidence;  // ITEM -> PATH overrides
  std::string costs_path;                  // the run's cost table; "" = <run_dir>/costs.json when present
  bool dry_run = false;
};
struct Decision {
  ReleaseRecord record;  // record_path set when written
  bool promote = false;
};
// Throws UsageError/IoError for unusable input (exit 2/3): an unreadable policy, an unknown
// baseline, no last-known-good yet, a checkpoint that does not validate, a named baseline scored on
// another hold-out. Last-known-good scored on another hold-out (an older snapshot) is scored again on
// the candidate's. After a rollback that still stands (decision/service_timeline.hpp standing_rollback), the
// candidate must also pass rolled_back_slice:<key> for each slice that rolled a release back.
// Missing or failing evidence is a reject naming the item, not an error. A cost table that is present
// but not one (decision/costs.hpp) is unusable input; an absent one is "costs": null in the record.
// The utility (decision/utility.hpp) is weighed against the fallback: last-known-good when there is
// one (its evaluation must be of the same hold-out), else the named baseline.
// With a baseline in service (a rollback put it back: registry.hpp ServiceState), --baseline
// last-known-good compares with that baseline under its own name, its n-gram scored again from
// its model file on the candidate's hold-out when the registered evaluation is of another; a reject
// leaves it in service; the rolled-back slices are held to the rolled-back release's own
// release-time figures (decision/rollback_rules.hpp rolled_back_slice_checks).
Decision decide_release(const DecideOptions& options);

}  // namespace shardtrain::release_gate
