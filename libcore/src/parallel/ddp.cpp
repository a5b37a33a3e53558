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
  // One sum per sharding unit, so chunks match ZeRO's (exact_sum.hpp) and each unit can be reduced
  // as soon as backward completes it.
  units_ = registry.units();
  std::size_t covered = 0;
  for (const auto& u : units_) {
    if (u.begin != covered)
      throw Error(ExitCode::kInternal, "deterministic reduction: the sharding units do not cover the gradient buffer");
    unit_sums_.emplace_back(std::vector<std::size_t>{u.size()}, std::vector<std::string>{"unit " + u.name});
    covered = u.end;
  }
  if (covered != n_)
    throw Error(ExitCode::kInternal, "deterministic reduction: the sharding units do not cover the gradient buffer");
}

void GradientReducer::start_step() {
  exposed_s_ = 0;
  in_flight_.clear();
  lanes_in_flight_.clear();
  if (mode_ == ReductionMode::kFast) backend_.fill(grads_, n_, 0.0f);
  else
    for (auto& sum : unit_sums_) sum.clear();
}

void GradientReducer::before_backward(int micro_batch) {
  if (mode_ == ReductionMode::kDeterministic) {
    backend_.fill(grads_, n_, 0.0f);
    last_micro_batch_ = micro_batch == micro_batches_ - 1;
    units_pending_ = units_.size();
    return;
  }
  overlap_active_ = micro_batch == micro_batches_ - 1 && comm_.size() > 1;
  next_bucket_ = 0;
}

void GradientReducer::gradient_ready(std::size_t ready_from) {
  if (mode_ == ReductionMode::kFast && overlap_active_) launch_ready_buckets(ready_from);
  if (mode_ == ReductionMode::kDeterministic && last_micro_batch_ && comm_.size() > 1) reduce_ready_units(ready_from);
}

void GradientReducer::reduce_ready_units(std::size_t ready_from) {
  const auto ready = [&] { return units_pending_ > 0 && units_[units_pending_ - 1].begin >= ready_from; };
  if (!ready()) return;
  backend_.synchronize();  // the units' gradients must be complete in memory before they are read
  const std::int64_t micro_batches = std::int64_t(micro_batches_) * comm_.size();
  while (ready()) {
    const std::size_t u = --units_pending_;
    ExactSum& sum = unit_sums_[u];
    sum.add(grads_ + units_[u].begin);
    const Stopwatch watch;  // blocking: the all-gather of the chunks' digits
    sum.agree(comm_, micro_batches, "the gradient");
    exposed_s_ += watch.seconds();
    if (comm_.size() > 1) lanes_in_flight_.push_back(comm_.all_reduce_async(sum.words(), ExactSum::kLanes * sum.size()));
  }
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
  if (mode_ == ReductionMode::kFast || last_micro_batch_) return;  // the last one: reduce_ready_units
  backend_.synchronize();  // the micro-batch's gradient must be complete in memory
  for (std::size_t u = 0; u < units_.size(); ++u) unit_sums_[u].add(grads_ + units_[u].begin);
}

double GradientReducer::finish(const std::vector<double>& micro_batch_loss_sums) {
  const bool deterministic = mode_ == ReductionMode::kDeterministic;
  if (!deterministic && comm_.size() > 1) launch_ready_buckets(0);
  if (deterministic) reduce_ready_units(0);  // the units backward completed last (on one rank: all)
  const Stopwatch watch;
  if (deterministic) {
    for (auto& h : lanes_in_flight_) h.wait();
    lanes_in_flight_.clear();
    for (std::size_t u = 0; u < units_.size(); ++u)
      unit_sums_[u].decode(unit_sums_[u].words(), 0, units_[u].size(), grads_ + units_[u].begin);
  } else {
    for (auto& h : in_flight_) h.wait();
    in_flight_.clear();
  }
  const double loss = reduce_loss_sums(comm_, deterministic, micro_batch_loss_sums);
  if (comm_.size() > 1) exposed_s_ += watch.seconds();
  return loss;
}

}  // namespace shardtrain
