// Phases of a training job, as the flight recorder stamps them on every collective and as the
// fault injection selects them (skip-collective:...,phase=NAME). Lives in `comm` because the
// communicator is the lowest layer that needs it; the trainer (layer `train`) sets it.
//
// Each process has one current phase (an atomic, default kSetup): the trainer's thread sets it
// as the job moves on (set_phase or PhaseScope), and every communicator stamps it on the records
// of the operations submitted while it holds. A communicator whose work runs beside the step loop
// (the asynchronous checkpoint writer's group) carries a fixed phase instead: CommOptions::phase.
#pragma once
#include <string>

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
void set_phase(Phase phase);
Phase current_phase();

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
