#include "shardtrain/decision/record.hpp"

#include <cstdio>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {
std::string check_text(const CheckValue& v) {
  if (const double* d = std::get_if<double>(&v)) {
    char b[40];
    std::snprintf(b, sizeof b, "%.6g", *d);
    return b;
  }
  if (const std::string* t = std::get_if<std::string>(&v)) return *t;
  return "-";
}
}  // namespace

ModelCardRelease model_card_release(const ReleaseRecord& r) {
  ModelCardRelease c;
  c.promote = r.promote;
  c.decided = r.decided;
  c.record_path = r.record_path;
  c.reasons = r.reasons;
  const HoldoutSummary& s = r.candidate.scores;
  c.holdout = ModelCardRelease::Holdout{r.candidate.holdout.selection_snapshot_id, r.candidate.holdout.cutoff,
                                        s.sequences, s.tokens, s.loss, s.interval.lower, s.interval.upper,
                                        s.perplexity};
  for (const CheckResult& k : r.checks)
    if (k.applicable) c.checks.push_back({k.name, check_text(k.value), check_text(k.limit), k.passed});
  return c;
}

}  // namespace shardtrain
