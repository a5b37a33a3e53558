// ZeRO-1/2/3 as a TrainingStrategy (zero.hpp). The step is the shared micro-batch loop
// (micro_batch_loop.hpp); this file supplies its hooks: sharded gradient buffers, per-unit
// reduce-scatter (of fp32 sums in fast mode, of exact fixed-point sums in deterministic mode)
// launched from the model's unit hooks, the sharded norm,
// AdamW on the shards and the all-gather of the updated shards. Stages 1-2 launch that all-gather
// per unit when the next forward begins (its first unit) and wait for unit u's at the forward's
// begin of unit u, so it overlaps the forward instead of being exposed. Not at the end of the
// step: the step loop's own collectives between steps (the stop flag's all-reduce every step,
// the straggler reports) would queue behind every gather in flight on the group's one engine and
// wait for all of them, unseen by any phase (a whole gather exposed per step on a slow link).
// Everything that reads the full parameters outside the forward settles them first, launching
// the gathers if they are still due (collective: every such reader runs on every rank).
#include <algorithm>
#include <functional>
#include <map>

#include "micro_batch_loop.hpp"
#include "shardtrain/backend/capabilities.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/model/init.hpp"
#include "shardtrain/model/train_state.hpp"
#include "shardtrain/parallel/ddp.hpp"
#include "shardtrain/parallel/exact_sum.hpp"
#include "shardtrain/parallel/layout_plan.hpp"
#include "shardtrain/parallel/state_layout.hpp"
#include "shardtrain/parallel/tensor_parallel.hpp"
#include "shardtrain/parallel/zero.hpp"

namespace shardtrain {

// ---------------------------------------------------------------- the strategy --------------------

namespace {

class ZeroStrategy final : public TrainingStrategy, private UnitStorage, private StepHooks {
 public:
  ZeroStrategy(Backend& backend, Communicator& comm, const ModelConfig& model, const OptimizerConfig& optimizer,
               const StrategyOptions& options)
      : backend_(backend),
        comm_(comm),
        stage_(options.zero_stage),
        sharded_(options.sharded.empty() ? sharded_state_kinds(options.zero_stage) : options.sharded),
        params_sharded_(is_sharded(StateKind::kParameters)),
        grads_sharded_(is_sharded(StateKind::kGradients)),
        deterministic_(options.deterministic),
        reshard_(options.reshard_after_forward),
        micro_batch_(options.micro_batch),
        accum_(options.grad_accum),
        optimizer_(optimizer),
        model_(backend, model, options.micro_batch, false, options.tp_comm),
        layout_(model_.registry(), comm.size(), comm.rank()),
        tp_(model_.tensor_parallel_comm()) {
    optimizer_.validate();
    // The planner (layout_plan.hpp) refuses a stage the backend does not run and plans the moments
    // sharded at every stage >= 1; anything else reaching here is a caller's bug.
    if (!backend_capabilities(backend.device()).runs_zero_stage(stage_) || !is_sharded(StateKind::kExpAvg) ||
        !is_sharded(StateKind::kExpAvgSq))
      throw Error(ExitCode::kInternal, "ZeRO strategy: ZeRO-" + std::to_string(stage_) + " on " + backend.describe() +
                                           " with these sharded state kinds is not a layout plan_layout accepts");
    const std::size_t U = layout_.units().size();
    const std::size_t S = layout_.shard_total();
    tracker_.add(MemoryCategory::kActivations, model_.activation_bytes());
    if (!params_sharded_) full_params_ = TrackedArray(backend, layout_.padded_total(), tracker_, MemoryCategory::kParameters);
    else param_shard_ = TrackedArray(backend, S, tracker_, MemoryCategory::kParameters);
    if (!grads_sharded_) full_grads_ = TrackedArray(backend, layout_.padded_total(), tracker_, MemoryCategory::kGradients);
    else grad_shard_ = TrackedArray(backend, S, tracker_, MemoryCategory::kGradients);
    exp_avg_ = TrackedArray(backend, S, tracker_, MemoryCategory::kOptimizer);
    exp_avg_sq_ = TrackedArray(backend, S, tracker_, MemoryCategory::kOptimizer);
    // The all-gather of updated shards stages them here; one rank has nothing to gather.
    if (!params_sharded_ && comm.size() > 1) gather_staging_ = TrackedArray(backend, S, tracker_, MemoryCategory::kCommunication);
    gathered_.resize(U);
    gather_handle_.resize(U);
    unit_grad_.resize(U);
    exact_.resize(U);
    param_gather_.resize(U);
    model_.set_unit_storage(this);
  }
  ~ZeroStrategy() override {
    // The engine may still be writing into full_params_: never free it under an all-gather.
    for (auto& h : param_gather_) {
      if (!h.valid()) continue;
      try {
        h.wait();
      } catch (...) {
        // The job is ending on a communication failure already reported.
      }
    }
  }

  std::string describe() const override {
    std::string s = "ZeRO-" + std::to_string(stage_) + " over " + std::to_string(comm_.size()) + " rank" +
                    (comm_.size() == 1 ? "" : "s") +
                    (tp_ ? " x TP " + std::to_string(tp_->size()) : std::string()) + ", " + std::to_string(layout_.units().size()) +
                    " units, shards padded to " + std::to_string(comm_.size()) + " x " +
                    std::to_string(Backend::kReductionChunk) + ", " +
                    (deterministic_ ? "deterministic exact sums" : "fast mode");
    if (params_sharded_) s += reshard_ ? ", reshard after forward" : ", no reshard after forward";
    return s;
  }
  const ParameterRegistry& registry() const override { return model_.registry(); }
  int zero_stage() const override { return stage_; }

  void initialise(std::uint64_t seed) override {
    for_each_owned([&](std::size_t u, const ParameterInfo& t, std::size_t lo, std::size_t hi) {
      (void)t;
      init_flat_range(model_.registry(), seed, model_.config().n_layer, lo, hi - lo, param_ptr(u, lo));
    });
    gather_full_params();
  }

  StepResult run_step(std::int64_t step, const std::int32_t* tokens, int micro_batches, int micro_batch,
                      double global_tokens) override {
    if (micro_batches != accum_)
      throw Error(ExitCode::kInternal, "ZeRO step: " + std::to_string(micro_batches) + " micro-batches, planned " +
                                           std::to_string(accum_));
    return run_micro_batch_step(model_, *this, optimizer_, step, tokens, micro_batches, micro_batch, global_tokens);
  }

  // Under TP a shard of a local tensor maps to its logical runs; a replicated tensor's shards are
  // the same on every TP rank and written by TP rank 0 only.
  std::vector<ckpt::PieceView> checkpoint_pieces() override {
    settle_full_params();
    // comm_ is the data-parallel group; under TP the world rank is dp_rank x T + tp_rank (job.hpp).
    const TensorParallelPlace& place = model_.place();
    const StateLayout layout{comm_.size() * place.size, stage_, place.size};
    const auto& tensors = model_.registry().tensors();
    std::vector<ckpt::PieceView> pieces;
    for (const auto& p : owned_state_pieces(model_.registry(), layout, comm_.rank() * place.size + place.rank))
      pieces.push_back({state_tensor_prefix(p.kind) + tensors[p.tensor].name, p.offset, p.count,
                        state_ptr(p.kind, p.unit, p.local)});
    return pieces;
  }

  void restore(const ckpt::CheckpointReader& reader) override {
    check_checkpoint_tensors(reader, model_.registry());
    std::vector<ckpt::ReadRequest> reads;
    for (StateKind k : kCheckpointStateKinds)
      for_each_owned([&](std::size_t u, const ParameterInfo&, std::size_t lo, std::size_t hi) {
        add_local_range_reads(model_.registry(), state_tensor_prefix(k), lo, hi, const_cast<float*>(state_ptr(k, u, lo)),
                              reads);
      });
    reader.read_batch(reads);
  }

  void settle_restored() override { gather_full_params(); }

  void with_full_model(const std::function<void(GptModel&)>& fn) override {
    // A temporary full model on rank 0 (hold-out evaluation, params.h5); not part of the step's
    // memory accounting. Stage 3 gathers every unit (collective on all ranks). Under TP, DP rank 0
    // of every TP position assembles its local model, and its TP group gathers the shards into the
    // unsplit model on world rank 0.
    settle_full_params();
    // Stages 1-2 unsplit: the strategy's own model already reads the full parameters where they lie
    // (no copy, no second set of activations); its forward issues no collective at these stages.
    if (!params_sharded_ && !tp_) {
      if (comm_.rank() == 0) fn(model_);
      return;
    }
    std::unique_ptr<GptModel> full;
    std::vector<float> local;  // TP: this rank's local parameters, host
    if (comm_.rank() == 0) {
      if (tp_) local.resize(model_.registry().total());
      else full = std::make_unique<GptModel>(backend_, model_.config(), micro_batch_);
    }
    const auto& units = layout_.units();
    DeviceArray<float> tmp;
    for (std::size_t u = 0; u < units.size(); ++u) {
      const UnitShard& s = units[u];
      const float* src = full_unit(u, tmp);
      if (full) backend_.copy_bytes(full->params().data() + s.begin, src, s.size() * sizeof(float));
      if (!local.empty()) backend_.download_bytes(local.data() + s.begin, src, s.size() * sizeof(float));
    }
    if (!local.empty()) full = gather_tensor_parallel_model(*tp_, backend_, model_.config(), local, micro_batch_);
    if (full) fn(*full);
  }

  // One unit at a time (not with_full_model's whole model): stages 1-2 hand over the full
  // parameters where they lie, stage 3 gathers each unit into a buffer of the unit's size.
  void for_each_full_parameter(const std::function<void(const ParameterInfo&, const float*)>& fn) override {
    if (tp_) return TrainingStrategy::for_each_full_parameter(fn);  // the TP gather assembles a model
    settle_full_params();
    const auto& tensors = model_.registry().tensors();
    const auto& units = layout_.units();
    DeviceArray<float> gathered;
    std::vector<float> tensor;
    std::size_t next = 0;  // the registry's tensors in order; each lies inside one unit
    for (std::size_t u = 0; u < units.size(); ++u) {
      const UnitShard& s = units[u];
      const float* unit = full_unit(u, gathered);
      for (; next < tensors.size() && tensors[next].offset < s.end; ++next) {
        if (comm_.rank() != 0) continue;
        const ParameterInfo& t = tensors[next];
        if (t.offset < s.begin || t.offset + t.numel > s.end)
          throw Error(ExitCode::kInternal, "ZeRO: tensor " + t.name + " is not inside unit " + std::to_string(u));
        fn(t, backend_.host_floats(unit + (t.offset - s.begin), t.numel, tensor));
      }
    }
  }

  std::vector<float> replicated_parameters() override {
    if (params_sharded_) return {};
    settle_full_params();
    std::vector<float> flat(model_.registry().total());
    for (const auto& s : layout_.units())
      backend_.download_bytes(flat.data() + s.begin, full_params_.data() + s.padded_offset, s.size() * sizeof(float));
    return flat;
  }

  MemoryReport memory_report() const override {
    MemoryReport r = tracker_.report();
    const double P = double(model_.registry().total()), N = double(comm_.size());
    // The formula of docs/ARCHITECTURE.md by what is sharded: 4P per whole kind, 4P/N per sharded
    // one (parameters, gradients), the two moments always sharded (8P/N).
    r.formula_model_state = (params_sharded_ ? 4 * P / N : 4 * P) + (grads_sharded_ ? 4 * P / N : 4 * P) + 8 * P / N;
    r.zero_stage = stage_;
    return r;
  }

 private:
  // ---- layout helpers ----
  // Unit u's full (padded) parameters: stages 1-2 where they lie, stage 3 all-gathered into
  // `gathered` (collective: every rank calls it for the same unit).
  const float* full_unit(std::size_t u, DeviceArray<float>& gathered) {
    const UnitShard& s = layout_.units()[u];
    if (!params_sharded_) return full_params_.data() + s.padded_offset;
    gathered = DeviceArray<float>(backend_, s.padded);
    comm_.all_gather(param_shard_.data() + s.shard_offset, gathered.data(), s.shard);
    return gathered.data();
  }
  // fn(unit, tensor, lo, hi) over the intersections of this rank's shards with every tensor.
  void for_each_owned(const std::function<void(std::size_t, const ParameterInfo&, std::size_t, std::size_t)>& fn) {
    const auto& tensors = model_.registry().tensors();
    for_each_owned_range(model_.registry(), layout_,
                         [&](std::size_t u, std::size_t i, std::size_t lo, std::size_t hi) { fn(u, tensors[i], lo, hi); });
  }
  // Start of this rank's slice of unit u in each sharded buffer.
  float* param_shard_ptr(std::size_t u) {
    const UnitShard& s = layout_.units()[u];
    return !params_sharded_ ? full_params_.data() + s.padded_offset + std::size_t(comm_.rank()) * s.shard
                       : param_shard_.data() + s.shard_offset;
  }
  float* grad_shard_ptr(std::size_t u) {
    const UnitShard& s = layout_.units()[u];
    return !grads_sharded_ ? full_grads_.data() + s.padded_offset + std::size_t(comm_.rank()) * s.shard
                       : grad_shard_.data() + s.shard_offset;
  }
  // Pointer of registry element `index` (owned, in unit u) in a sharded buffer.
  float* param_ptr(std::size_t u, std::size_t index) {
    return param_shard_ptr(u) + (index - layout_.units()[u].begin - std::size_t(comm_.rank()) * layout_.units()[u].shard);
  }
  // Pointer of registry element `index` (owned, in unit u) of a checkpointed state kind.
  const float* state_ptr(StateKind kind, std::size_t u, std::size_t index) {
    if (kind == StateKind::kParameters) return param_ptr(u, index);
    const UnitShard& s = layout_.units()[u];
    const std::size_t off = s.shard_offset + (index - s.begin - std::size_t(comm_.rank()) * s.shard);
    return (kind == StateKind::kExpAvg ? exp_avg_ : exp_avg_sq_).data() + off;
  }

  // ---- UnitStorage (called by the model) ----
  const float* params(int u) override {
    return !params_sharded_ ? full_params_.data() + layout_.units()[u].padded_offset : gathered_[u].data();
  }
  float* grads(int u) override { return unit_grad_[u]; }

  void forward_begin(int u) override {
    poll_pending();
    if (!params_sharded_) {
      if (u == 0) launch_due_param_gathers();
      wait_full_params(u);
      return;
    }
    ensure_gathered(u);
    if (u + 1 < int(layout_.units().size())) launch_gather(u + 1);  // prefetch the next unit
  }
  void forward_end(int u) override {
    if (params_sharded_ && reshard_ && u >= 1 && u + 1 < int(layout_.units().size())) gathered_[u].reset();
  }
  void backward_begin(int u) override {
    poll_pending();
    const int last = int(layout_.units().size()) - 1;
    if (params_sharded_) {
      ensure_gathered(u);
      const int next = u == last ? last - 1 : (u >= 2 && u < last ? u - 1 : -1);  // backward order: 0, L+1, L..1
      if (next >= 1) launch_gather(next);
    }
    const UnitShard& s = layout_.units()[u];
    if (!grads_sharded_) {
      unit_grad_[u] = full_grads_.data() + s.padded_offset;
      if (deterministic_) backend_.fill(unit_grad_[u], s.padded, 0.0f);
    } else {
      unit_grad_buf_for(u) = TrackedArray(backend_, s.padded, tracker_, MemoryCategory::kGathered);
      unit_grad_[u] = unit_grad_buf_for(u).data();
    }
  }
  void backward_end(int u) override {
    const UnitShard& s = layout_.units()[u];
    const bool last_micro = micro_ == accum_ - 1;
    if (params_sharded_) gathered_[u].reset();
    backend_.synchronize();
    if (deterministic_) {
      deterministic_backward_end(u, last_micro);
      return;
    }
    // Fast mode. Stage 1 accumulates over micro-batches in the full buffer, reduces at the last.
    if (!grads_sharded_ && !last_micro) return;
    float* in = unit_grad_[u];
    auto holder = std::make_shared<TrackedArray>(!grads_sharded_ ? TrackedArray() : std::move(unit_grad_buf_for(u)));
    if (comm_.size() == 1) {
      if (grads_sharded_) backend_.accumulate(grad_shard_ptr(u), in, s.shard);
      holder->reset();
      return;
    }
    const bool direct = grads_sharded_ && micro_ == 0;  // the shard is still zero: reduce straight into it
    float* out = direct ? grad_shard_ptr(u) : nullptr;
    std::shared_ptr<TrackedArray> staging;
    if (!direct) {
      staging = std::make_shared<TrackedArray>(backend_, s.shard, tracker_, MemoryCategory::kCommunication);
      out = staging->data();
    }
    auto handle = comm_.reduce_scatter_async(in, out, s.shard);
    pending_.push_back({handle, [this, u, holder, staging]() {
                          holder->reset();
                          if (!staging) return;
                          if (!grads_sharded_)
                            backend_.copy_bytes(grad_shard_ptr(u), staging->data(), layout_.units()[u].shard * sizeof(float));
                          else
                            backend_.accumulate(grad_shard_ptr(u), staging->data(), layout_.units()[u].shard);
                          staging->reset();
                        }});
  }

  TrackedArray& unit_grad_buf_for(int u) { return unit_grad_bufs_[u]; }

  // Deterministic mode (exact_sum.hpp): the micro-batch's unit gradient joins the unit's exact
  // sum; after the last micro-batch the group agrees the digit windows (blocking: a small
  // all-gather) and the 64-bit lanes are reduce-scattered asynchronously; each rank decodes its shard.
  void deterministic_backward_end(int u, bool last_micro) {
    const UnitShard& s = layout_.units()[u];
    if (!exact_[u]) {
      exact_[u] = std::make_unique<ExactSum>(std::vector<std::size_t>{s.padded});
      tracker_.add(MemoryCategory::kGathered, exact_[u]->bytes());
    }
    exact_[u]->add(unit_grad_[u]);
    if (grads_sharded_) unit_grad_buf_for(u).reset();
    if (!last_micro) return;
    const Stopwatch watch;
    exact_[u]->agree(comm_, std::int64_t(accum_) * comm_.size(), "unit " + model_.registry().units()[u].name);
    exposed_s_ += watch.seconds();
    const std::size_t first = std::size_t(comm_.rank()) * s.shard;
    auto release = [this, u]() {
      tracker_.sub(MemoryCategory::kGathered, exact_[u]->bytes());
      exact_[u].reset();
    };
    if (comm_.size() == 1) {
      exact_[u]->decode(exact_[u]->words() + ExactSum::kLanes * first, first, s.shard, grad_shard_ptr(u));
      release();
      return;
    }
    auto summed = std::make_shared<std::vector<std::uint64_t>>(ExactSum::kLanes * s.shard);
    tracker_.add(MemoryCategory::kCommunication, summed->size() * sizeof(std::uint64_t));
    auto handle = comm_.reduce_scatter_async(exact_[u]->words(), summed->data(), summed->size());
    pending_.push_back({handle, [this, u, first, summed, release]() {
                          exact_[u]->decode(summed->data(), first, layout_.units()[u].shard, grad_shard_ptr(u));
                          tracker_.sub(MemoryCategory::kCommunication, summed->size() * sizeof(std::uint64_t));
                          release();
                        }});
  }

  // ---- StepHooks (called by the shared micro-batch loop) ----
  void begin_step() override {
    exposed_s_ = 0;
    if (!grads_sharded_) backend_.fill(full_grads_.data(), full_grads_.size(), 0.0f);
    else backend_.fill(grad_shard_.data(), grad_shard_.size(), 0.0f);
  }
  // The unit hooks of the coming backward read which micro-batch it is (the last one reduces).
  void before_backward(int micro_batch) override { micro_ = micro_batch; }
  // Finishes the reductions still in flight, then the loss: the exposed communication of the step.
  double finish_reduction(const std::vector<double>& micro_batch_loss_sums) override {
    const Stopwatch watch;
    drain_pending();
    const double loss = reduce_loss_sums(comm_, deterministic_, micro_batch_loss_sums);
    exposed_s_ += watch.seconds();
    return loss;
  }
  // Squared global gradient norm from per-chunk sums of the shards (contract 2 of docs/ARCHITECTURE.md; see zero.hpp).
  double gradient_norm_squared() override {
    const std::size_t chunk = Backend::kReductionChunk;
    const auto& units = layout_.units();
    const std::size_t per_rank = layout_.shard_total() / chunk;
    std::vector<double> mine(per_rank, 0.0);
    for (std::size_t u = 0; u < units.size(); ++u) {
      const UnitShard& s = units[u];
      const float* g = grad_shard_ptr(u);
      for (std::size_t k = 0; k < s.shard / chunk; ++k) {
        const std::size_t first = s.begin + std::size_t(comm_.rank()) * s.shard + k * chunk;
        if (first >= s.end) break;
        const std::size_t len = std::min(chunk, s.end - first);
        mine[s.shard_offset / chunk + k] =
            tp_ ? tensor_parallel_sum_squares(backend_, model_.registry(), g + k * chunk, first, first + len)
                : backend_.sum_squares(g + k * chunk, len);
      }
    }
    std::vector<double> all(per_rank * comm_.size());
    if (comm_.size() > 1) comm_.all_gather(mine.data(), all.data(), per_rank);
    else all = mine;
    double total = 0.0;
    for (const auto& s : units) {
      double unit = 0.0;
      for (int r = 0; r < comm_.size(); ++r)
        for (std::size_t k = 0; k < s.shard / chunk; ++k) unit += all[std::size_t(r) * per_rank + s.shard_offset / chunk + k];
      total += unit;
    }
    return tp_ ? add_tensor_parallel_ranks(total, *tp_) : total;
  }
  void scale_gradients(float factor) override {
    for (std::size_t u = 0; u < layout_.units().size(); ++u)
      backend_.scale(grad_shard_ptr(u), layout_.units()[u].shard, factor);
  }
  // AdamW on this rank's shards, per owned tensor range (weight decay per tensor).
  void apply_update(std::int64_t step, double lr) override {
    AdamWArgs args = adamw_step_args(optimizer_, step, lr);
    for_each_owned([&](std::size_t u, const ParameterInfo& tensor, std::size_t lo, std::size_t hi) {
      args.weight_decay = tensor.weight_decay ? float(optimizer_.weight_decay) : 0.0f;
      const std::size_t off = lo - layout_.units()[u].begin - std::size_t(comm_.rank()) * layout_.units()[u].shard;
      const std::size_t so = layout_.units()[u].shard_offset + off;
      backend_.adamw_update(param_shard_ptr(u) + off, grad_shard_ptr(u) + off, exp_avg_.data() + so,
                            exp_avg_sq_.data() + so, hi - lo, args);
    });
  }
  // Stages 1-2: due, launched when the next forward begins (see the top of the file).
  void share_updated_parameters() override { param_gathers_due_ = !params_sharded_ && comm_.size() > 1; }
  double exposed_seconds() const override { return exposed_s_; }

  // ---- communication ----
  struct Pending {
    CollectiveHandle handle;
    std::function<void()> done;
  };
  // Completes the finished reductions at the front of the queue (they finish in order).
  void poll_pending() {
    while (!pending_.empty() && pending_.front().handle.test()) {
      pending_.front().done();
      pending_.erase(pending_.begin());
    }
  }
  void drain_pending() {
    for (auto& p : pending_) {
      p.handle.wait();
      p.done();
    }
    pending_.clear();
  }
  void launch_gather(int u) {
    if (!gathered_[u].empty() || gather_handle_[u].valid()) return;
    const UnitShard& s = layout_.units()[u];
    gathered_[u] = TrackedArray(backend_, s.padded, tracker_, MemoryCategory::kGathered);
    gather_handle_[u] = comm_.all_gather_async(param_shard_.data() + s.shard_offset, gathered_[u].data(), s.shard);
  }
  void ensure_gathered(int u) {
    launch_gather(u);
    if (gather_handle_[u].valid()) {
      const Stopwatch watch;
      gather_handle_[u].wait();
      exposed_s_ += watch.seconds();
      gather_handle_[u] = CollectiveHandle();
    }
  }
  // Stages 1-2: every rank's updated slices back into the full padded parameters, one all-gather
  // per unit in forward order (unit u's lands in param_gather_[u]).
  void launch_full_param_gathers() {
    if (params_sharded_ || comm_.size() == 1) return;
    settle_full_params();  // the staging buffer is reused
    for (std::size_t u = 0; u < layout_.units().size(); ++u) {
      const UnitShard& s = layout_.units()[u];
      float* stage = gather_staging_.data() + s.shard_offset;
      backend_.copy_bytes(stage, param_shard_ptr(u), s.shard * sizeof(float));
      param_gather_[u] = comm_.all_gather_async(stage, full_params_.data() + s.padded_offset, s.shard);
    }
  }
  // Waits for unit u's all-gather of updated parameters, if one is in flight (exposed time).
  void wait_full_params(std::size_t u) {
    if (!param_gather_[u].valid()) return;
    const Stopwatch watch;
    param_gather_[u].wait();
    param_gather_[u] = CollectiveHandle();
    exposed_s_ += watch.seconds();
  }
  void launch_due_param_gathers() {
    if (!param_gathers_due_) return;
    param_gathers_due_ = false;
    launch_full_param_gathers();
  }
  void settle_full_params() {
    launch_due_param_gathers();
    for (std::size_t u = 0; u < param_gather_.size(); ++u) wait_full_params(u);
  }
  // Blocking (initialise, restore): launched and settled at once.
  void gather_full_params() {
    launch_full_param_gathers();
    settle_full_params();
  }

  Backend& backend_;
  Communicator& comm_;
  bool is_sharded(StateKind kind) const { return std::find(sharded_.begin(), sharded_.end(), kind) != sharded_.end(); }

  int stage_;  // the label (describe, manifests); what is sharded is sharded_, the plan's
  std::vector<StateKind> sharded_;
  bool params_sharded_, grads_sharded_;
  bool deterministic_, reshard_;
  int micro_batch_, accum_;
  OptimizerConfig optimizer_;
  MemoryTracker tracker_;
  GptModel model_;
  ShardLayout layout_;
  Communicator* tp_;  // the model's tensor-parallel group (nullptr: unsplit)

  TrackedArray full_params_, param_shard_, full_grads_, grad_shard_, exp_avg_, exp_avg_sq_, gather_staging_;
  std::vector<TrackedArray> gathered_;                 // stage 3: gathered units
  std::vector<CollectiveHandle> gather_handle_;        // stage 3: all-gathers in flight
  std::vector<CollectiveHandle> param_gather_;         // stages 1-2: updated parameters' all-gathers in flight
  bool param_gathers_due_ = false;                     // stages 1-2: updated shards not yet sent to the others
  std::vector<float*> unit_grad_;                      // the unit gradient buffer of this micro-batch
  std::map<int, TrackedArray> unit_grad_bufs_;         // stages 2-3: transient unsharded unit gradients
  std::vector<std::unique_ptr<ExactSum>> exact_;       // deterministic: per unit, first micro-batch to reduce-scatter
  std::vector<Pending> pending_;
  int micro_ = 0;
  double exposed_s_ = 0;
};

}  // namespace

std::unique_ptr<TrainingStrategy> make_zero_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                     const OptimizerConfig& optimizer, const StrategyOptions& options) {
  return std::make_unique<ZeroStrategy>(backend, comm, model, optimizer, options);
}

}  // namespace shardtrain
