// Flight-record dumps on demand (contract 6): a thread that writes the rank's flight record
// (flight_recorder.hpp, reason "signal") each time the job receives SIGUSR2, SIGTERM or SIGUSR1
// (base/stop_signals.hpp: the handlers only count; a signal handler cannot write a file). The job
// goes on after a SIGUSR2; after a stop signal received outside a StopSignals scope the thread ends
// the process as the signal would have (default action), once the record is written.
//
// Polls every 20 ms: a dump follows its signal within that, well inside the grace a launcher gives
// between SIGTERM and SIGKILL (Open MPI, Slurm: seconds).
#pragma once
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace shardtrain {

class SignalDumpWatcher {
 public:
  // Dumps go to `path` (the run folder's flight.rank<R>.json) as world rank `world_rank` of
  // `world_size`. Needs a live JobSignals.
  SignalDumpWatcher(std::string path, int world_rank, int world_size);
  ~SignalDumpWatcher();  // stops the thread (a signal already counted is dumped first)
  SignalDumpWatcher(const SignalDumpWatcher&) = delete;
  SignalDumpWatcher& operator=(const SignalDumpWatcher&) = delete;

 private:
  void run();
  void dump_for(int signal);

  std::string path_;
  int world_rank_, world_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// "SIGUSR2", "SIGTERM", ... ("signal N" for others).
const char* signal_name(int signal);

}  // namespace shardtrain
