// Phases of a training job, as the flight recorder stamps them on every collective and as the
// fault injection selects them (skip-collective:...,phase=NAME). Lives in `comm` because the
// communicator is the lowest layer that needs it; the trainer (layer `train`) sets it.
//
// Each process has one current phase (an atomic, default kSetup): the trainer's thread sets it
// as the job moves on (set_phase or PhaseScope), and every communicator stamps it on the records
// of the operations submitted while it holds. A communicator whose work runs beside the step loop
// (the asynchronous checkpoint writer's group) carries a fixed phase instead: CommOptions::phase.
//
// The process also keeps the trainer's current step and its last phase transitions (phase, step,
// unix time), which every flight record carries (`now`, `phases`): a rank stuck outside any
// collective (in compute, I/O, the data loader) then shows as "in data at step 812 for 41 s".
// A phase observer (set_phase_observer) sees every transition on the trainer's thread: the
// fault injection hangs, kills or slows a rank there.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain {

// kStepEnd: between a step's update and the next step's data (the replica check, the stop-signal
// agreement), so that a hang there is not blamed on the optimizer.
enum class Phase { kSetup, kResume, kData, kForward, kBackward, kOptimizer, kStepEnd, kCheckpoint, kEvaluation, kFinish };
inline constexpr int kNumPhases = 10;

// "setup", "resume", "data", "forward", "backward", "optimizer", "step-end", "ckpt", "eval", "finish": the names
// in flight records, fault-injection specs and messages.
const char* phase_name(Phase phase);
// The inverse of phase_name; UsageError naming the text and every choice otherwise.
Phase parse_phase(const std::string& text);

// The process-wide current phase (thread-safe; relaxed: a stamp, not a synchronisation point).
// set_phase also appends a transition to the history (below) and calls the phase observer.
void set_phase(Phase phase);
Phase current_phase();

// The trainer's current step (-1 before the first), stamped on the transitions that follow.
void set_current_step(std::int64_t step);
std::int64_t current_step();

struct PhaseTransition {
  Phase phase = Phase::kSetup;
  std::int64_t step = -1;
  double t = 0;  // unix seconds
};
// The last transitions (at most kPhaseHistory), oldest first; the last one is the current phase
// (empty before the first set_phase, or with the history off).
inline constexpr int kPhaseHistory = 64;
std::vector<PhaseTransition> phase_history();
// The last of them (the current phase's entry), without copying the rest: what a poller needs.
std::optional<PhaseTransition> last_phase_transition();
// Off: set_phase keeps no history (the flight recorder's off switch, for measuring its cost).
void set_phase_history_enabled(bool enabled);

// Called by set_phase after the change, on the thread that changed it, with the new phase and the
// current step; empty: none. One observer per process (the trainer installs it for the fault
// injection and removes it when the job ends).
using PhaseObserver = std::function<void(Phase phase, std::int64_t step)>;
void set_phase_observer(PhaseObserver observer);

// Sets the process-wide phase for a scope and restores the one before it on exit.
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase) : previous_(current_phase()) { set_phase(phase); }
  ~PhaseScope() { set_phase(previous_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase previous_;
};

}  // namespace shardtrain
