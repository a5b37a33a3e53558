#include "shardtrain/comm/dump_watcher.hpp"

#include <csignal>
#include <cstdio>

#include "shardtrain/base/log.hpp"
#include "shardtrain/base/stop_signals.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/phase.hpp"

namespace shardtrain {
namespace {

// Writes the record; a failure to write is logged, never thrown (the job goes on).
void write_record(const std::string& path, int world_rank, int world_size, const char* reason,
                  const nlohmann::json& trigger, const std::string& what) {
  try {
    write_flight_record(path, world_rank, world_size, reason, trigger);
    log_line(what + ": flight record written to " + path);
  } catch (const std::exception& e) {
    log_line(what + ": flight record NOT written: " + e.what());
  }
}

}  // namespace

const char* signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGTERM: return "SIGTERM";
    default: return "signal";
  }
}

DumpWatcher::DumpWatcher(std::string path, int world_rank, int world_size, std::chrono::milliseconds stall_after)
    : path_(std::move(path)),
      world_rank_(world_rank),
      world_size_(world_size),
      stall_after_(stall_after),
      thread_([this] { run(); }) {}

DumpWatcher::~DumpWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DumpWatcher::run() {
  std::uint64_t seen = JobSignals::dump_requests();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const bool stopping = cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_; });
    lock.unlock();
    const std::uint64_t requests = JobSignals::dump_requests();
    if (requests != seen) {
      seen = requests;
      dump_for_signal(JobSignals::last_signal());
    }
    if (!stopping) dump_if_stalled();
    lock.lock();
    if (stopping) return;
  }
}

void DumpWatcher::dump_for_signal(int signal) {
  write_record(path_, world_rank_, world_size_, "signal", {{"signal", signal_name(signal)}}, signal_name(signal));
  if (const int stop = JobSignals::unhonoured_stop_signal(); stop != 0) {
    // It came outside the step loop: it ends the process, as it would have without a handler.
    std::signal(stop, SIG_DFL);
    std::raise(stop);
  }
}

void DumpWatcher::dump_if_stalled() {
  if (stall_after_.count() <= 0) return;
  const std::optional<PhaseTransition> last = last_phase_transition();  // polled every 20 ms: no copy of the history
  if (!last) return;
  const PhaseTransition& now = *last;
  if (now.t == stalled_since_) return;  // this phase entry was dumped already
  const double in_phase_s = FlightRecorder::now() - now.t;
  if (in_phase_s * 1000.0 < double(stall_after_.count())) return;
  stalled_since_ = now.t;
  char what[160];
  std::snprintf(what, sizeof what, "in %s at step %lld for %.1f s", phase_name(now.phase),
                static_cast<long long>(now.step), in_phase_s);
  write_record(path_, world_rank_, world_size_, "stalled",
               {{"phase", phase_name(now.phase)}, {"step", now.step}, {"in_phase_s", in_phase_s}},
               std::string("stalled ") + what);
}

}  // namespace shardtrain
