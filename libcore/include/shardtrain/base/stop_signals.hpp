// The job's signals. Each handler only records (async-signal-safe); threads poll.
//   SIGTERM, SIGUSR1  "save at the next step boundary, then stop" (what Slurm sends before a time
//                     limit), honoured while a StopSignals scope is alive (the trainer's step loop,
//                     where all ranks agree on it through an all-reduce, so every rank saves the
//                     same step). Outside that scope it ends the process as it would have without
//                     a handler, once the flight record is written (below).
//   SIGUSR2           "write your flight record now", without stopping (mpirun forwards SIGUSR1
//                     and SIGUSR2 to every rank, so `kill -USR2 <mpirun pid>` dumps them all).
// Every one of the three also asks for a flight-record dump (comm/dump_watcher.hpp), so a rank
// that a launcher kills with SIGTERM after another rank failed leaves its record first.
#pragma once
#include <csignal>
#include <cstdint>

namespace shardtrain {

// Installs the handlers for the whole job (run_training); restores the previous ones on exit.
class JobSignals {
 public:
  JobSignals();
  ~JobSignals();
  JobSignals(const JobSignals&) = delete;
  JobSignals& operator=(const JobSignals&) = delete;

  // Signals received since construction (each asks for one dump), and the latest one's number.
  static std::uint64_t dump_requests();
  static int last_signal();
  // A stop signal that arrived while no StopSignals scope was alive (it ends the process), or 0.
  static int unhonoured_stop_signal();

 private:
  struct sigaction old_term_ {}, old_usr1_ {}, old_usr2_ {};
};

// The scope in which SIGTERM and SIGUSR1 mean "stop at the next step boundary".
class StopSignals {
 public:
  StopSignals();   // clears the stop flag; from here stop signals are honoured
  ~StopSignals();  // no longer honoured
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The stop signal number received since construction, or 0.
  static int received();
};

}  // namespace shardtrain
