#include "shardtrain/parallel/strategy.hpp"

#include "shardtrain/parallel/zero.hpp"

namespace shardtrain {

std::unique_ptr<TrainingStrategy> make_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                const OptimizerConfig& optimizer, const StrategyOptions& options) {
  if (options.zero_stage == 0) return make_ddp_strategy(backend, comm, model, optimizer, options);
  return make_zero_strategy(backend, comm, model, optimizer, options);
}

}  // namespace shardtrain
