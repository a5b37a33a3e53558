#include "shardtrain/comm/phase.hpp"

#include <atomic>
#include <chrono>
#include <mutex>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

constexpr const char* kNames[kNumPhases] = {"setup",     "resume",   "data", "forward", "backward",
                                            "optimizer", "step-end", "ckpt", "eval",    "finish"};

std::atomic<Phase> g_phase{Phase::kSetup};
std::atomic<std::int64_t> g_step{-1};
std::atomic<bool> g_history_enabled{true};

// The transition ring: set_phase runs a few times per step, so a mutex costs nothing measurable.
struct History {
  std::mutex mu;
  PhaseTransition ring[kPhaseHistory];
  std::uint64_t count = 0;
};
History& history() {
  static History h;
  return h;
}

PhaseObserver& observer() {
  static PhaseObserver o;
  return o;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

const char* phase_name(Phase phase) {
  const int i = static_cast<int>(phase);
  return i >= 0 && i < kNumPhases ? kNames[i] : "unknown";
}

Phase parse_phase(const std::string& text) {
  std::string choices;
  for (int i = 0; i < kNumPhases; ++i) {
    if (text == kNames[i]) return static_cast<Phase>(i);
    choices += (i ? ", " : "") + std::string(kNames[i]);
  }
  throw UsageError("phase '" + text + "' is not one of " + choices);
}

void set_phase(Phase phase) {
  g_phase.store(phase, std::memory_order_relaxed);
  const std::int64_t step = g_step.load(std::memory_order_relaxed);
  if (g_history_enabled.load(std::memory_order_relaxed)) {
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mu);
    h.ring[h.count % kPhaseHistory] = {phase, step, unix_now()};
    ++h.count;
  }
  if (const PhaseObserver& o = observer()) o(phase, step);
}

Phase current_phase() { return g_phase.load(std::memory_order_relaxed); }

void set_current_step(std::int64_t step) { g_step.store(step, std::memory_order_relaxed); }
std::int64_t current_step() { return g_step.load(std::memory_order_relaxed); }

std::vector<PhaseTransition> phase_history() {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  std::vector<PhaseTransition> out;
  const std::uint64_t first = h.count > kPhaseHistory ? h.count - kPhaseHistory : 0;
  for (std::uint64_t i = first; i < h.count; ++i) out.push_back(h.ring[i % kPhaseHistory]);
  return out;
}

std::optional<PhaseTransition> last_phase_transition() {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.count == 0) return std::nullopt;
  return h.ring[(h.count - 1) % kPhaseHistory];
}

void set_phase_history_enabled(bool enabled) {
  g_history_enabled.store(enabled);
  if (!enabled) {
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mu);
    h.count = 0;
  }
}

void set_phase_observer(PhaseObserver o) { observer() = std::move(o); }

}  // namespace shardtrain
