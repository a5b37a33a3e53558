// The launcher's pure decisions (restart_policy.hpp): rules 1-7 and the elastic world size.
#include "shardtrain/launch/restart_policy.hpp"

#include <algorithm>
#include <cmath>

#include "shardtrain/base/error.hpp"

namespace shardtrain::launch {

void RestartPolicy::validate() const {
  if (max_restarts < 0) throw UsageError("--max-restarts must be a whole number (got " + std::to_string(max_restarts) + ")");
  if (!(backoff_s >= 0) || !std::isfinite(backoff_s)) throw UsageError("--backoff must be a number of seconds >= 0");
  if (rank_failures < 1) throw UsageError("--rank-failures must be a positive whole number");
  if (min_ranks) {
    if (*min_ranks < 1) throw UsageError("--min-ranks must be a positive whole number");
    if (*min_ranks > launch_world)
      throw UsageError("--min-ranks " + std::to_string(*min_ranks) + " is above the command's " +
                       std::to_string(launch_world) + " ranks");
    if (micro_batches < 1) throw UsageError("--min-ranks needs --global-batch N (and --micro-batch) in the command");
  }
}

const char* action_name(Action a) {
  switch (a) {
    case Action::kFinish: return "finish";
    case Action::kExclude: return "exclude";
    case Action::kStop: return "stop";
    case Action::kRestart: return "restart";
  }
  return "?";
}

NextAction decide_after_attempt(const RestartPolicy& policy, PolicyState& state, const AttemptOutcome& outcome) {
  const int status = outcome.exit_status;
  const std::string attempt = "attempt " + std::to_string(state.attempt);
  NextAction next;
  next.exit_status = status;
  if (status == 0) {
    next.message = attempt + " succeeded";
    return next;
  }
  if (outcome.stop_requested) {
    next.message = attempt + " ended with status " + std::to_string(status) +
                   " after SIGUSR1 (the job is being stopped): not restarted";
    return next;
  }
  if (status == 2) {
    next.message = attempt + " failed with status 2 (a usage or input error: not retried)";
    return next;
  }
  // Rule 4: the run of verdicts naming one culprit.
  if (outcome.culprit_rank && outcome.culprit_rank == state.last_culprit) {
    ++state.same_culprit_runs;
  } else {
    state.same_culprit_runs = outcome.culprit_rank ? 1 : 0;
    state.last_culprit = outcome.culprit_rank;
  }
  state.lost_slots += outcome.lost_node_ranks;
  const bool node_lost = outcome.lost_node_ranks > 0 && outcome.culprit_rank;
  const bool culprit_reached_k = outcome.culprit_rank && state.same_culprit_runs >= policy.rank_failures;
  if (policy.exclude_hosts && (culprit_reached_k || node_lost)) {
    const std::string named = node_lost ? "node lost: " + std::to_string(outcome.lost_node_ranks) + " ranks gone at once"
                                        : "rank " + std::to_string(*outcome.culprit_rank) + " named " +
                                              std::to_string(state.same_culprit_runs) + " times in a row";
    if (!outcome.culprit_host.empty()) {
      next.action = Action::kExclude;
      next.exit_status = kExcludedExitStatus;
      next.exclude_host = outcome.culprit_host;
      next.exclude_rank = *outcome.culprit_rank;
      next.message = "excluded host " + outcome.culprit_host + " (" + named + "): requeued by --exclude-cmd";
      next.logged_stop = true;
      return next;
    }
    next.note = named + ", but its host is unknown: not excluded";
  }
  if (state.attempt >= policy.max_restarts) {
    next.action = Action::kStop;
    next.logged_stop = true;
    next.message = attempt + " failed with status " + std::to_string(status) + "; no restarts left (--max-restarts " +
                   std::to_string(policy.max_restarts) + "): stopping";
    return next;
  }
  if (outcome.committed_checkpoint) state.failures_without_progress = 0;
  next.action = Action::kRestart;
  next.wait_s = std::min(policy.backoff_s * std::pow(2.0, state.failures_without_progress), kMaxBackoffS);
  ++state.failures_without_progress;
  next.message = attempt + " failed with status " + std::to_string(status) +
                 (outcome.culprit_rank ? " (rank " + std::to_string(*outcome.culprit_rank) + ")" : "");
  return next;
}

WorldChoice choose_world(const RestartPolicy& policy, PolicyState& state, std::optional<int> capacity_answer) {
  WorldChoice choice;
  if (!policy.min_ranks) {
    choice.world = state.world;
    return choice;
  }
  int capacity = policy.launch_world;
  std::string reason;
  if (capacity_answer && *capacity_answer < capacity) {
    capacity = *capacity_answer;
    reason = "capacity " + std::to_string(capacity) + " ranks (--capacity-cmd)";
  }
  if (state.lost_slots > 0 && policy.launch_world - state.lost_slots < capacity) {
    capacity = policy.launch_world - state.lost_slots;
    reason = std::to_string(state.lost_slots) + " ranks' slots on lost nodes";
  }
  if (state.last_culprit && state.same_culprit_runs >= policy.rank_failures && state.world - 1 < capacity) {
    capacity = state.world - 1;
    reason = "rank " + std::to_string(*state.last_culprit) + " failed " + std::to_string(state.same_culprit_runs) +
             " times in a row";
  }
  int fitting = 0;
  for (int w = capacity; w >= *policy.min_ranks; --w)
    if (policy.micro_batches % w == 0) {
      fitting = w;
      break;
    }
  if (fitting == 0) {
    choice.reason = "no world size between --min-ranks " + std::to_string(*policy.min_ranks) + " and " +
                    std::to_string(capacity) + " divides the global batch's " + std::to_string(policy.micro_batches) +
                    " micro-batches; giving up";
    return choice;
  }
  choice.world = fitting;
  if (fitting != state.world) {
    choice.reason = fitting > state.world ? "capacity back to " + std::to_string(capacity) + " ranks" : reason;
    state.world = fitting;
    state.same_culprit_runs = 0;
    state.last_culprit.reset();
  }
  return choice;
}

}  // namespace shardtrain::launch
