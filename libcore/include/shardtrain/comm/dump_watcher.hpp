// The flight-record dumps a rank writes on its own, besides the comm engine's on a timeout
// (contract 6 of docs/ARCHITECTURE.md). One thread per job that writes the rank's flight record (flight_recorder.hpp):
//   - reason "signal", each time the job receives SIGUSR2, SIGTERM or SIGUSR1 (base/stop_signals.hpp:
//     the handlers only count; a signal handler cannot write a file). The job goes on after a
//     SIGUSR2; after a stop signal received outside a StopSignals scope the thread ends the process
//     as the signal would have (default action), once the record is written.
//   - reason "stalled", once per phase entry, when the rank has stayed in one phase (phase.hpp) for
//     longer than `stall_after` (the collective timeout): a rank stuck in compute, I/O or the data
//     loader never times out itself, and a launcher may kill it too fast for the SIGTERM dump
//     (Open MPI gives 1 s by default, a starved rank may need more), so it writes its record while
//     its peers time out waiting for it. The job goes on.
//
// Polls every 20 ms: a dump follows its signal within that.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace shardtrain {

class DumpWatcher {
 public:
  // Dumps go to `path` (the run folder's flight.rank<R>.json) as world rank `world_rank` of
  // `world_size`. Needs a live JobSignals. `stall_after` zero: no stall dumps.
  DumpWatcher(std::string path, int world_rank, int world_size, std::chrono::milliseconds stall_after);
  ~DumpWatcher();  // stops the thread (a signal already counted is dumped first)
  DumpWatcher(const DumpWatcher&) = delete;
  DumpWatcher& operator=(const DumpWatcher&) = delete;

 private:
  void run();
  void dump_for_signal(int signal);
  void dump_if_stalled();

  std::string path_;
  int world_rank_, world_size_;
  std::chrono::milliseconds stall_after_;
  double stalled_since_ = 0;  // the phase entry (unix s) already dumped as stalled
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// "SIGUSR2", "SIGTERM", ... ("signal N" for others).
const char* signal_name(int signal);

}  // namespace shardtrain
