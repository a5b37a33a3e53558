#include "holdout_phase.hpp"

#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/phase.hpp"
#include "shardtrain/train/evaluation.hpp"

namespace shardtrain {

bool evaluation_due(const TrainOptions& o, std::int64_t step, bool last) {
  const int every = o.evaluation.every;
  return (every > 0 && (step + 1) % every == 0) || last;
}

HoldoutEvaluation evaluate_current_model(Job& job) {
  const Stopwatch watch;
  const PhaseScope phase(Phase::kEvaluation);
  HoldoutEvaluation evaluation;
  // Nothing to score (no hold-out split): no full model either (ZeRO-3 would gather one on rank 0).
  // The same answer on every rank: the dataset is the same.
  if (job.data.num_holdout_samples() == 0) return evaluation;
  job.strategy->with_full_model(
      [&](GptModel& model) {
        evaluation.result = evaluate_holdout(model, job.data, job.options.evaluation.samples);
      });
  evaluation.seconds = watch.seconds();
  return evaluation;
}

}  // namespace shardtrain
