// DDP as a TrainingStrategy: every rank holds the full model and optimizer state; gradients go
// through the GradientReducer (ddp.hpp); checkpoints spread the replicated state over the ranks.
// Under tensor parallelism every rank holds its TP position's full local model, replicated over
// the data-parallel group (`comm`), and the model runs its TP collectives on options.tp_comm.
#include <vector>

#include "shardtrain/parallel/ddp.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/model/init.hpp"
#include "shardtrain/parallel/state_layout.hpp"
#include "shardtrain/parallel/strategy.hpp"
#include "shardtrain/parallel/tensor_parallel.hpp"
#include "shardtrain/model/train_state.hpp"

namespace shardtrain {
namespace {

class DdpStrategy final : public TrainingStrategy {
 public:
  DdpStrategy(Backend& backend, Communicator& comm, const ModelConfig& model, const OptimizerConfig& optimizer,
              const StrategyOptions& options)
      : comm_(comm),
        model_(backend, model, options.micro_batch, true, options.tp_comm),
        runner_(model_, optimizer),
        reducer_(backend, comm, model_.registry(), model_.grads().data(),
                 options.deterministic ? ReductionMode::kDeterministic : ReductionMode::kFast,
                 static_cast<std::size_t>(options.bucket_mb * 1024 * 1024), options.grad_accum),
        deterministic_(options.deterministic) {
    runner_.set_reducer(&reducer_);
    if (backend.device() != DeviceKind::kCpu) {  // host staging for checkpoints on a device backend
      const std::size_t n = model_.registry().total();
      host_params_.resize(n);
      host_m_.resize(n);
      host_v_.resize(n);
    }
  }

  std::string describe() const override {
    const int tp = model_.place().size;
    return std::string("DDP") + (tp > 1 ? " x TP " + std::to_string(tp) : std::string()) + ", " +
           (deterministic_ ? "deterministic exact sums"
                           : "fast mode, " + std::to_string(reducer_.buckets().size()) + " gradient buckets");
  }
  const ParameterRegistry& registry() const override { return model_.registry(); }
  int zero_stage() const override { return 0; }

  void initialise(std::uint64_t seed) override {
    model_.set_parameters(init_parameters(model_.registry(), seed, model_.config().n_layer));
  }

  StepResult run_step(std::int64_t step, const std::int32_t* tokens, int micro_batches, int micro_batch,
                      double global_tokens) override {
    return runner_.run(step, tokens, micro_batches, micro_batch, global_tokens);
  }

  std::vector<ckpt::PieceView> checkpoint_pieces() override {
    // comm_ is the data-parallel group; under TP the world rank is dp_rank x T + tp_rank (job.hpp).
    const TensorParallelPlace& place = model_.place();
    const StateBuffers state = host_state(true);
    const float* base[3] = {state.params, state.exp_avg, state.exp_avg_sq};
    const auto& tensors = model_.registry().tensors();
    std::vector<ckpt::PieceView> pieces;
    for (const auto& p : owned_state_pieces(model_.registry(), {comm_.size() * place.size, 0, place.size},
                                            comm_.rank() * place.size + place.rank))
      pieces.push_back({state_tensor_prefix(p.kind) + tensors[p.tensor].name, p.offset, p.count, base[int(p.kind)] + p.local});
    return pieces;
  }

  void restore(const ckpt::CheckpointReader& reader) override {
    const StateBuffers targets = host_state(false);
    restore_state(reader, model_.registry(), targets);
    if (!host_params_.empty()) {
      model_.params().upload(host_params_.data(), host_params_.size());
      runner_.optimizer().exp_avg().upload(host_m_.data(), host_m_.size());
      runner_.optimizer().exp_avg_sq().upload(host_v_.data(), host_v_.size());
    }
  }

  void with_full_model(const std::function<void(GptModel&)>& fn) override {
    if (comm_.rank() != 0) return;
    if (!model_.place().split()) return fn(model_);
    // TP: the TP group of DP rank 0 gathers its shards; its TP rank 0 (world rank 0) assembles
    // the logical parameters into an unsplit model.
    std::unique_ptr<GptModel> full = gather_tensor_parallel_model(model_, model_.max_batch());
    if (full) fn(*full);
  }

  // The local parameters: replicas along the DP axis (under TP, the replica check also compares the
  // replicated tensors along the TP axis).
  std::vector<float> replicated_parameters() override { return model_.download_parameters(); }

  MemoryReport memory_report() const override {
    const double p = double(model_.registry().total());
    MemoryReport r;
    r.peak[std::size_t(MemoryCategory::kParameters)] = p * 4;
    r.peak[std::size_t(MemoryCategory::kGradients)] = p * 4;
    r.peak[std::size_t(MemoryCategory::kOptimizer)] = p * 8;
    r.peak[std::size_t(MemoryCategory::kActivations)] = double(model_.activation_bytes());
    if (deterministic_) {  // the exact sums' lanes, and the reduction pieces in flight
      r.peak[std::size_t(MemoryCategory::kGathered)] = double(ExactSum::kLanes * sizeof(std::uint64_t)) * p;
      r.peak[std::size_t(MemoryCategory::kCommunication)] = double(GradientReducer::piece_bytes(comm_.size()));
    }
    r.model_state = p * 16;
    r.total = r.model_state + r.bytes(MemoryCategory::kActivations) + r.bytes(MemoryCategory::kGathered) +
              r.bytes(MemoryCategory::kCommunication);
    return r;
  }

 private:
  // The state as host pointers: the device buffers on the CPU backend, else staging copies
  // (downloaded when `download`).
  StateBuffers host_state(bool download) {
    if (host_params_.empty())
      return {model_.params().data(), runner_.optimizer().exp_avg().data(), runner_.optimizer().exp_avg_sq().data()};
    if (download) {
      model_.params().download(host_params_.data(), host_params_.size());
      runner_.optimizer().exp_avg().download(host_m_.data(), host_m_.size());
      runner_.optimizer().exp_avg_sq().download(host_v_.data(), host_v_.size());
    }
    return {host_params_.data(), host_m_.data(), host_v_.data()};
  }

  Communicator& comm_;
  GptModel model_;
  StepRunner runner_;
  GradientReducer reducer_;
  bool deterministic_;
  std::vector<float> host_params_, host_m_, host_v_;
};

}  // namespace

std::unique_ptr<TrainingStrategy> make_ddp_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                    const OptimizerConfig& optimizer, const StrategyOptions& options) {
  return std::make_unique<DdpStrategy>(backend, comm, model, optimizer, options);
}

}  // namespace shardtrain
