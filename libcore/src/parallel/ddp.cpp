#include "shardtrain/parallel/ddp.hpp"

#include <algorithm>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"

namespace shardtrain {
namespace {
bool is_power_of_two(long long x) { return x > 0 && (x & (x - 1)) == 0; }
}  // namespace

void require_deterministic_layout(int ranks, int micro_batches_per_rank) {
  if (!is_power_of_two(ranks))
    throw UsageError("--deterministic needs a power-of-two number of data-parallel ranks (got " + std::to_string(ranks) +
                     ")");
  if (!is_power_of_two(micro_batches_per_rank))
    throw UsageError("--deterministic needs a power-of-two number of micro-batches per rank (grad_accum = " +
                     std::to_string(micro_batches_per_rank) + "); choose --global-batch / (--micro-batch x ranks) "
                     "as 1, 2, 4, ...");
}

std::vector<GradientBucket> plan_buckets(const ParameterRegistry& registry, std::size_t bucket_bytes) {
  std::vector<GradientBucket> buckets;
  const auto& tensors = registry.tensors();
  const std::size_t limit = bucket_bytes / sizeof(float);
  std::size_t end = registry.total();
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
    const std::size_t begin = it->offset;
    if (end - begin >= std::max<std::size_t>(limit, 1) || std::next(it) == tensors.rend()) {
      buckets.push_back({begin, end});
      end = begin;
    }
  }
  return buckets;
}

GradientReducer::GradientReducer(Backend& backend, Communicator& comm, const ParameterRegistry& registry,
                                 float* grads, ReductionMode mode, std::size_t bucket_bytes, int micro_batches_per_rank)
    : backend_(backend),
      comm_(comm),
      grads_(grads),
      n_(registry.total()),
      mode_(mode),
      micro_batches_(micro_batches_per_rank),
      buckets_(plan_buckets(registry, bucket_bytes)),
      grad_tree_([this](std::size_t left, std::size_t right) {
        backend_.add(slots_[left].data(), slots_[left].data(), slots_[right].data(), n_);
        free_slots_.push_back(right);
        return left;
      }) {
  if (mode == ReductionMode::kDeterministic) require_deterministic_layout(comm.size(), micro_batches_per_rank);
}

std::size_t GradientReducer::free_slot() {
  if (!free_slots_.empty()) {
    const std::size_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  slots_.emplace_back(backend_, n_);
  return slots_.size() - 1;
}

void GradientReducer::start_step() {
  exposed_s_ = 0;
  in_flight_.clear();
  grad_tree_.clear();
  free_slots_.clear();
  for (std::size_t s = 0; s < slots_.size(); ++s) free_slots_.push_back(s);
  if (mode_ == ReductionMode::kFast) backend_.fill(grads_, n_, 0.0f);
}

void GradientReducer::before_backward(int micro_batch) {
  if (mode_ == ReductionMode::kDeterministic) {
    backend_.fill(grads_, n_, 0.0f);
    return;
  }
  overlap_active_ = micro_batch == micro_batches_ - 1 && comm_.size() > 1;
  next_bucket_ = 0;
}

void GradientReducer::gradient_ready(std::size_t ready_from) {
  if (mode_ == ReductionMode::kFast && overlap_active_) launch_ready_buckets(ready_from);
}

void GradientReducer::launch_ready_buckets(std::size_t ready_from) {
  const auto ready = [&] { return next_bucket_ < buckets_.size() && buckets_[next_bucket_].begin >= ready_from; };
  if (!ready()) return;  // most units complete no bucket: no device synchronisation for them
  backend_.synchronize();  // the bucket's gradients must be complete in memory before MPI reads them
  while (ready()) {
    const GradientBucket& b = buckets_[next_bucket_++];
    in_flight_.push_back(comm_.all_reduce_async(grads_ + b.begin, b.end - b.begin));
  }
}

void GradientReducer::after_backward(int /*micro_batch*/) {
  if (mode_ == ReductionMode::kFast) return;
  // The local micro-batch tree: equal levels merge as left + right.
  const std::size_t slot = free_slot();
  backend_.copy_bytes(slots_[slot].data(), grads_, n_ * sizeof(float));
  grad_tree_.push(slot);
}

double GradientReducer::finish(double local_loss_sum) {
  double loss = local_loss_sum;
  if (mode_ == ReductionMode::kFast) {
    if (comm_.size() == 1) return loss;
    launch_ready_buckets(0);
    const Stopwatch watch;
    for (auto& h : in_flight_) h.wait();
    comm_.all_reduce(&loss, 1);
    exposed_s_ += watch.seconds();
    in_flight_.clear();
    return loss;
  }
  if (grad_tree_.partials() != 1)
    throw Error(ExitCode::kInternal, "deterministic reduction: the local tree did not close (" +
                                         std::to_string(grad_tree_.partials()) + " partial sums left)");
  backend_.copy_bytes(grads_, slots_[grad_tree_.take()].data(), n_ * sizeof(float));
  if (comm_.size() > 1) {
    backend_.synchronize();
    const Stopwatch watch;
    comm_.all_reduce_canonical(grads_, n_);
    comm_.all_reduce_canonical(&loss, 1);
    exposed_s_ += watch.seconds();
  }
  return loss;
}

}  // namespace shardtrain
