#include "shardtrain/parallel/strategy.hpp"

#include "shardtrain/base/error.hpp"
#include "shardtrain/parallel/zero.hpp"

namespace shardtrain {

std::unique_ptr<TrainingStrategy> make_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                const OptimizerConfig& optimizer, const StrategyOptions& options) {
  if (options.zero_stage == 0) return make_ddp_strategy(backend, comm, model, optimizer, options);
  if (options.zero_stage >= 1 && options.zero_stage <= 3)
    return make_zero_strategy(backend, comm, model, optimizer, options);
  throw UsageError("--zero-stage must be 0 (DDP), 1, 2 or 3 (got " + std::to_string(options.zero_stage) + ")");
}

}  // namespace shardtrain
