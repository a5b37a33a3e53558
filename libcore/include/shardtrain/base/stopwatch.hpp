// The one stopwatch of libcore: wall-clock seconds on the monotonic clock (std::chrono::steady_clock,
// never the calendar clock, so an NTP step cannot make a phase negative). Every step-log and
// summary time (data_s, fwd_s, ..., train_seconds) is read through it.
#pragma once
#include <chrono>

namespace shardtrain {

class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;
  Stopwatch() : start_(Clock::now()) {}
  // Seconds since construction or the last restart().
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // Seconds since the last start, and starts again from now (one clock read: laps add up exactly).
  double lap() {
    const auto now = Clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }
  void restart() { start_ = Clock::now(); }
  Clock::time_point started() const { return start_; }

 private:
  Clock::time_point start_;
};

}  // namespace shardtrain
