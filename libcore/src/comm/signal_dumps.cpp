#include "shardtrain/comm/signal_dumps.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>

#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stop_signals.hpp"
#include "shardtrain/comm/flight_recorder.hpp"

namespace shardtrain {

const char* signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGTERM: return "SIGTERM";
    default: return "signal";
  }
}

SignalDumpWatcher::SignalDumpWatcher(std::string path, int world_rank, int world_size)
    : path_(std::move(path)), world_rank_(world_rank), world_size_(world_size), thread_([this] { run(); }) {}

SignalDumpWatcher::~SignalDumpWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SignalDumpWatcher::run() {
  std::uint64_t seen = JobSignals::dump_requests();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const bool stopping = cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_; });
    const std::uint64_t requests = JobSignals::dump_requests();
    if (requests != seen) {
      seen = requests;
      lock.unlock();
      dump_for(JobSignals::last_signal());
      lock.lock();
    }
    if (stopping) return;
  }
}

void SignalDumpWatcher::dump_for(int signal) {
  try {
    write_flight_record(path_, world_rank_, world_size_, "signal", {{"signal", signal_name(signal)}});
    log_line(std::string(signal_name(signal)) + ": flight record written to " + path_);
  } catch (const std::exception& e) {
    log_line(std::string(signal_name(signal)) + ": flight record NOT written: " + e.what());
  }
  if (signal != SIGUSR2 && !StopSignals::honoured()) {
    // Not in the step loop: the stop signal ends the process, as it would have without a handler.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

}  // namespace shardtrain
