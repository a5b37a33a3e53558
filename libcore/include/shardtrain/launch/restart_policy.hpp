// The resilient launcher's decisions as a pure policy: what happened in the attempts so far in,
// the next action out. No processes, files or clocks: the launcher (launcher.hpp) carries it out,
// and the unit tests drive it with made-up outcomes.
//
// The rules, in the order they are applied after an attempt ends (decide_after_attempt):
//   1. exit 0: finish (0).
//   2. SIGUSR1 arrived (a batch job's time-limit warning): finish with the attempt's status; the
//      ranks checkpointed and exited on their own signal, and a job being stopped is not restarted.
//   3. exit 2 (a usage or input error): never retried; the same command cannot succeed.
//   4. The culprit to count (the diagnosis's; none for an error of the whole job) is compared with
//      the previous attempt's: the same rank again adds one to the run, anything else starts it over.
//   5. With host exclusion on (--exclude-cmd) and a culprit named K (--rank-failures) times in a
//      row, or a lost node (its host is gone: no second verdict is needed): exclude the host and
//      finish with 75 (the batch script requeues the job without it). An unknown host cannot be
//      excluded: the policy goes on to 6 and says so.
//   6. Restarts used up (--max-restarts): stop with the attempt's status.
//   7. Otherwise restart after a backoff: `backoff_s * 2^n`, capped at kMaxBackoffS, where n counts
//      the failures in a row that committed no new checkpoint (an attempt that did resets n, so a
//      job failing once a day never waits as long as a crash loop).
// Elastic world size (choose_world, asked before each restart when min_ranks is set): the capacity
// is the first launch's world size, lowered to what --capacity-cmd answers, to what is left without
// the slots of the nodes lost so far (the cluster may not have noticed yet; a lost node comes back
// only with a new allocation), and to one slot less than now when the counted culprit reached K; the next world size is the largest W' in
// [min_ranks, capacity] that divides the global batch's micro-batches (grad_accum absorbs the
// rest); none: stop. A change of world size starts the culprit count over.
#pragma once
#include <optional>
#include <string>

namespace shardtrain::launch {

inline constexpr double kMaxBackoffS = 60;
inline constexpr int kExcludedExitStatus = 75;  // EX_TEMPFAIL: requeue me without the excluded host

struct RestartPolicy {
  int max_restarts = 3;
  double backoff_s = 1;
  int rank_failures = 2;           // K: consecutive verdicts naming one culprit before it goes
  bool exclude_hosts = false;      // --exclude-cmd given
  std::optional<int> min_ranks;    // elastic restarts when set
  int launch_world = 0;            // the first launch's world size (elastic)
  int micro_batches = 0;           // global batch / micro-batch (elastic)
  // UsageError naming the option when a value is out of range.
  void validate() const;
};

// What is known when an attempt has ended.
struct AttemptOutcome {
  int exit_status = 0;
  bool stop_requested = false;       // SIGUSR1 reached the launcher
  std::optional<int> culprit_rank;   // the diagnosis's culprit to count (none: ambiguous or job-wide)
  std::string culprit_host;          // "" unknown
  bool committed_checkpoint = false; // `latest` moved during the attempt
  int lost_node_ranks = 0;           // a lost node (verdict node-lost): how many ranks it held
};

// Carried from one attempt to the next (the policy's memory).
struct PolicyState {
  int attempt = 0;                   // the attempt that just ended
  int world = 0;                     // its world size (0: the command states none)
  int same_culprit_runs = 0;         // consecutive attempts naming last_culprit
  std::optional<int> last_culprit;
  int failures_without_progress = 0; // the backoff's exponent
  int lost_slots = 0;                // ranks on nodes lost so far: they stay lost for this launcher
};

enum class Action { kFinish, kExclude, kStop, kRestart };
const char* action_name(Action a);

struct NextAction {
  Action action = Action::kFinish;
  int exit_status = 0;       // kFinish, kExclude (75), kStop
  std::string message;       // one line: why (printed by the launcher; a stop's reason is logged)
  std::string note;          // a line printed before it ("" none): a culprit that could not be excluded
  double wait_s = 0;         // kRestart: the backoff before the relaunch
  std::string exclude_host;  // kExclude
  int exclude_rank = -1;     // kExclude
  bool logged_stop = false;  // kStop: the restart log records message as "stop": {reason}
};

// Rules 1-7; updates `state` (culprit run, backoff exponent).
NextAction decide_after_attempt(const RestartPolicy& policy, PolicyState& state, const AttemptOutcome& outcome);

struct WorldChoice {
  std::optional<int> world;  // empty: no world size fits (stop with `reason`)
  std::string reason;        // why it changed ("" when unchanged), or why none fits
};
// The elastic rule above. `capacity_answer`: what --capacity-cmd printed (empty: no command, or
// it printed no number). On a change of world size, `state.world` is updated and the culprit
// count starts over.
WorldChoice choose_world(const RestartPolicy& policy, PolicyState& state, std::optional<int> capacity_answer);

}  // namespace shardtrain::launch
