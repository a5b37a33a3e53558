// SIGTERM and SIGUSR1 as "save at the next step boundary, then stop" (what Slurm sends before a
// time limit). The handler only sets a flag; the trainer polls it once per step and all ranks
// agree on it through an all-reduce, so every rank saves the same step.
#pragma once
#include <csignal>

namespace shardtrain {

class StopSignals {
 public:
  StopSignals();   // installs the handlers and clears the flag
  ~StopSignals();  // restores the previous handlers
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal number received since construction, or 0.
  static int received();

 private:
  struct sigaction old_term_ {}, old_usr1_ {};
};

}  // namespace shardtrain
