// How the rollback rules, the registry's history and the monitor print a loss and its interval, and
// find a slice of a hold-out summary: one shape for every sentence a record or a table keeps
// (private to decision/; the monitor layer reads it too: PRIVATE_OF decision).
#pragma once
#include <cstdio>
#include <string>

#include "shardtrain/stats/holdout_scores.hpp"

namespace shardtrain::score_text {

inline std::string num(double v, int precision = 4) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", precision, v);
  return b;
}

inline std::string interval_text(double loss, double lower, double upper) {
  return num(loss) + " [" + num(lower) + ", " + num(upper) + "]";
}

inline const SliceScore* find_slice(const HoldoutSummary& s, const std::string& key) {
  for (const auto& slice : s.slices)
    if (slice.key == key) return &slice;
  return nullptr;
}

}  // namespace shardtrain::score_text
