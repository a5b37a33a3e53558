#include "shardtrain/base/stop_signals.hpp"

#include <atomic>

namespace shardtrain {
namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_last_signal = 0;
volatile std::sig_atomic_t g_unhonoured_stop = 0;  // a stop signal that came while no StopSignals scope was alive
std::atomic<std::uint64_t> g_dump_requests{0};  // lock-free on every target we build for
std::atomic<bool> g_honoured{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler reads the honoured flag");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the signal handler needs a lock-free counter");

extern "C" void on_job_signal(int signal) {
  g_last_signal = signal;
  // Decided now, not when a thread gets to it: the step loop may end (and its scope with it) in
  // between, and a stop it honoured must not then end the process.
  if (signal != SIGUSR2) {
    if (g_honoured.load(std::memory_order_relaxed)) g_stop_signal = signal;
    else g_unhonoured_stop = signal;
  }
  g_dump_requests.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

JobSignals::JobSignals() {
  g_stop_signal = 0;
  g_last_signal = 0;
  g_unhonoured_stop = 0;
  g_dump_requests.store(0);
  struct sigaction action {};
  action.sa_handler = on_job_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &old_term_);
  sigaction(SIGUSR1, &action, &old_usr1_);
  sigaction(SIGUSR2, &action, &old_usr2_);
}

JobSignals::~JobSignals() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
  sigaction(SIGUSR2, &old_usr2_, nullptr);
}

std::uint64_t JobSignals::dump_requests() { return g_dump_requests.load(std::memory_order_relaxed); }
int JobSignals::last_signal() { return g_last_signal; }
int JobSignals::unhonoured_stop_signal() { return g_unhonoured_stop; }

StopSignals::StopSignals() {
  g_stop_signal = 0;
  g_honoured.store(true);
}
StopSignals::~StopSignals() { g_honoured.store(false); }
int StopSignals::received() { return g_stop_signal; }

}  // namespace shardtrain
