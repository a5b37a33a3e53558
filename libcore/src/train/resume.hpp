// The training job's second phase, resume (contract 5 of docs/ARCHITECTURE.md): the newest valid checkpoint (--resume
// auto) or the one named, checked against this run -- same model, same global batch (contract 1),
// same seed, same data selection unless --allow-data-change -- and restored into the strategy.
// Another world size is fine: the tensors are logical and the sampler is elastic, so grad_accum
// adapts and a deterministic run continues bitwise.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "job.hpp"
#include "shardtrain/data/sampler.hpp"

namespace shardtrain {

// Where the step loop starts: step 0 with a fresh sampler, or a checkpoint's position.
struct ResumePoint {
  std::int64_t step = 0;            // completed steps: the first step to run
  data::SamplerState sampler{};
  std::string checkpoint_id;        // the checkpoint folder's name ("" when starting fresh)
};

// Collective. Without --resume: step 0. Otherwise finds and validates the checkpoint, restores
// the job's strategy from it and logs (rank 0) where the run continues; "auto" with no valid
// checkpoint starts at step 0, saying so.
ResumePoint resume(Job& job);

// The run when the checkpoint is already at or past --steps: logs that there is nothing to do
// (rank 0). Such a run writes no summary.
void log_nothing_to_do(const Job& job, const ResumePoint& start);

}  // namespace shardtrain
