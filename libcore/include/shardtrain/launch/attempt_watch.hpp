// While an attempt's command runs, the launcher watches the attempt's flight records
// (RUN_DIR/flight.rank*.json) for the job's failure, and ends a command that outlives it. Why: the
// ranks of a failed job record the failure at once (communicator.hpp "Timeouts": a timeout or a
// transport error dumps the record, then `teardown_grace`, 2 s, passes before the rank aborts), but
// the command may take seconds more to end: mpirun waits 3-8 s for its daemon on a node cut off
// from the network before it exits, and the verdict can only come after the command ends.
//
// The decision (decide_watch) is a pure function of what the launcher has seen:
//   - no rank has recorded a failure: keep waiting (a slow job is not a failed one);
//   - every rank of the attempt has recorded one: the records are complete; end the command once
//     `complete_grace_s` has passed since the last of them was seen and it is still running. Short:
//     nothing more will be recorded, and the command cannot end itself sooner than the ranks'
//     teardown grace (2 s) anyway, so waiting longer only delays the verdict (multinode_box bounds
//     the partition verdict at the collective timeout + 3 s);
//   - some ranks have: the others may still be writing theirs (they get the ranks' own teardown
//     grace, `settle_s`, to do so, and the job ends itself after it): end the command once
//     settle_s + grace_s have passed since the first was seen.
// A failure record is one whose triggers include `timeout` or `error` (docs/FORMATS.md "Flight
// record"): a communicator that failed, after which the rank aborts the job. Not `exit` (a rank
// leaving on an error of its own, e.g. a bad file with exit status 2, which must stay that status:
// the policy does not restart it), nor `signal`, `stalled` or `requested` dumps.
// Ending (the launcher): SIGTERM to the command, SIGKILL 0.25 s later if it is still there (mpirun
// with a daemon on a cut-off node does not end on SIGTERM: it waits for that daemon).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::launch {

struct WatchInput {
  int world_size = 0;                // ranks of the attempt (0: unknown: the records are never complete)
  std::map<int, double> failure_seen;  // rank -> unix s when the launcher first saw its failure record
  double now = 0;                    // unix s
  double settle_s = 2.0;             // the ranks' teardown grace (CommOptions::teardown_grace)
  double grace_s = 1.0;              // how long the command may outlive the settled failure
  double complete_grace_s = 0.25;    // ... once every rank has recorded it
};

struct WatchDecision {
  bool end = false;                  // end the command now
  std::optional<double> failed_at;   // unix s the first failure record was seen (none: no failure yet)
  bool complete = false;             // every rank of the attempt recorded a failure
  std::optional<double> end_at;      // unix s from which the command is ended (none: no failure yet)
};

WatchDecision decide_watch(const WatchInput& in);

// The ranks of RUN_DIR's flight records (flight.rank*.json) that record a failure (a trigger
// `timeout` or `error`) at or after `since` (unix s; a trigger without a time counts),
// skipping the ranks in `known` (already seen: not read again). A record that cannot be read (a
// newer format, being replaced) is skipped: it is read again at the next look.
std::vector<int> ranks_with_failure_records(const std::string& run_dir, double since, const std::map<int, double>& known);

}  // namespace shardtrain::launch
