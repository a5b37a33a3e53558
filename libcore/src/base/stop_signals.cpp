#include "shardtrain/base/stop_signals.hpp"

namespace shardtrain {
namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int signal) { g_stop_signal = signal; }
}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &old_term_);
  sigaction(SIGUSR1, &action, &old_usr1_);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int StopSignals::received() { return g_stop_signal; }

}  // namespace shardtrain
