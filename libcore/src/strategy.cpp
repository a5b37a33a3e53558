#include "shardtrain/strategy.hpp"

#include "shardtrain/error.hpp"

namespace shardtrain {

std::unique_ptr<TrainingStrategy> make_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                const OptimizerConfig& optimizer, const StrategyOptions& options) {
  if (options.zero_stage == 0) return make_ddp_strategy(backend, comm, model, optimizer, options);
  throw UsageError("--zero-stage " + std::to_string(options.zero_stage) +
                   " is not available in this build (stages 1-3 come with fsdp-train); use 0 (DDP)");
}

}  // namespace shardtrain
