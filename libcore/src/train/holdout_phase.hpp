// The training job's evaluation phase, run from the step loop: the temporal hold-out's loss on
// the full current parameters (evaluation.hpp's evaluate_holdout), every --eval-every steps and
// at the last step of the run (also one ended by a stop signal).
#pragma once
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "job.hpp"
#include "shardtrain/train/evaluation.hpp"

namespace shardtrain {

// Whether the step (0-based) evaluates; `last` when it is the run's last step.
bool evaluation_due(const TrainOptions& options, std::int64_t step, bool last);

struct HoldoutEvaluation {
  std::optional<HoldoutLoss> result;  // evaluate_holdout's on rank 0; empty elsewhere or with no hold-out
  double seconds = 0;               // wall time of the evaluation, gathering included
};

// Collective (the strategy may gather the full model for rank 0).
HoldoutEvaluation evaluate_current_model(Job& job);

}  // namespace shardtrain
