#include "shardtrain/parallel/ddp.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"

namespace shardtrain {

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
      buckets_(plan_buckets(registry, bucket_bytes)) {
  if (mode != ReductionMode::kDeterministic) return;
  std::vector<std::size_t> segments;  // the sharding units, so chunks match ZeRO's (exact_sum.hpp)
  std::vector<std::string> names;
  for (const auto& u : registry.units()) segments.push_back(u.size()), names.push_back("unit " + u.name);
  exact_ = ExactSum(segments, std::move(names));
  if (exact_.size() != n_)
    throw Error(ExitCode::kInternal, "deterministic reduction: the sharding units do not cover the gradient buffer");
}

void GradientReducer::start_step() {
  exposed_s_ = 0;
  in_flight_.clear();
  if (mode_ == ReductionMode::kFast) backend_.fill(grads_, n_, 0.0f);
  else exact_.clear();
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
  backend_.synchronize();  // the micro-batch's gradient must be complete in memory
  exact_.add(grads_);
}

double GradientReducer::finish(const std::vector<double>& micro_batch_loss_sums) {
  const bool deterministic = mode_ == ReductionMode::kDeterministic;
  if (!deterministic && comm_.size() > 1) launch_ready_buckets(0);
  const Stopwatch watch;
  if (deterministic) {
    exact_all_reduce(comm_, exact_, std::int64_t(micro_batches_) * comm_.size(), "the gradient", grads_);
  } else {
    for (auto& h : in_flight_) h.wait();
    in_flight_.clear();
  }
  const double loss = reduce_loss_sums(comm_, deterministic, micro_batch_loss_sums);
  if (comm_.size() > 1) exposed_s_ += watch.seconds();
  return loss;
}

}  // namespace shardtrain
