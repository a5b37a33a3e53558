#include "shardtrain/comm/phase.hpp"

#include <atomic>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

constexpr const char* kNames[kNumPhases] = {"setup",     "resume",   "data", "forward", "backward",
                                            "optimizer", "step-end", "ckpt", "eval",    "finish"};

std::atomic<Phase> g_phase{Phase::kSetup};

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

void set_phase(Phase phase) { g_phase.store(phase, std::memory_order_relaxed); }

Phase current_phase() { return g_phase.load(std::memory_order_relaxed); }

}  // namespace shardtrain
