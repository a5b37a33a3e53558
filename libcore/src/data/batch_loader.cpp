// Prefetching batch loader (batch_loader.hpp).
#include "shardtrain/data/batch_loader.hpp"

#include <chrono>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"

namespace shardtrain::data {

namespace {
uint64_t checked_num_samples(const TrainingData& data) {
  if (data.num_train_samples() == 0)
    throw UsageError(data.path() + ": the selection has no train sample of seq_len+1 = " +
                     std::to_string(data.seq_len() + 1) + " tokens (" +
                     std::to_string(data.num_train_tokens()) + " train tokens; check --cutoff)");
  return data.num_train_samples();
}
}  // namespace

BatchLoader::BatchLoader(const TrainingData& data, uint64_t seed, SamplerState start, int seq_len,
                         int micro_batch, int grad_accum, int dp_rank, int dp_size)
    : data_(data), sampler_(checked_num_samples(data), seed), seq_len_(seq_len), next_state_(start) {
  if (seq_len != data.seq_len())
    throw UsageError("batch loader seq_len " + std::to_string(seq_len) +
                     " differs from the training data's seq_len " + std::to_string(data.seq_len()));
  layout_ = {micro_batch, grad_accum, dp_rank, dp_size};
  if (micro_batch < 1 || grad_accum < 1 || dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size)
    throw UsageError("invalid batch layout: micro_batch " + std::to_string(micro_batch) +
                     ", grad_accum " + std::to_string(grad_accum) + ", dp_rank " +
                     std::to_string(dp_rank) + " of dp_size " + std::to_string(dp_size));
  (void)sampler_.advance(start, 0);  // throws if start.consumed is not below the epoch size
  thread_ = std::thread([this] { run(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

BatchLoader::StepBatch BatchLoader::assemble(SamplerState state) const {
  const Stopwatch watch;
  StepBatch b;
  b.state_before = state;
  b.sample_ids = rank_step_samples(sampler_, state, layout_);
  const std::size_t row = std::size_t(seq_len_) + 1;
  b.tokens.resize(b.sample_ids.size() * row);
  for (std::size_t k = 0; k < b.sample_ids.size(); ++k)
    data_.read_train_sample(b.sample_ids[k], b.tokens.data() + k * row);
  b.state_after = sampler_.advance(state, layout_.global_batch());
  b.load_s = watch.seconds();
  return b;
}

void BatchLoader::run() {
  for (;;) {
    SamplerState state;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || (!ready_ && !error_); });
      if (stop_) return;
      state = next_state_;
    }
    try {
      StepBatch b = assemble(state);
      std::lock_guard<std::mutex> lock(mutex_);
      next_state_ = b.state_after;
      ready_ = std::move(b);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

BatchLoader::StepBatch BatchLoader::next() {
  const Stopwatch watch;
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return ready_.has_value() || error_; });
  if (error_) std::rethrow_exception(error_);
  StepBatch b = std::move(*ready_);
  ready_.reset();
  lock.unlock();
  cv_.notify_all();  // the thread starts on the following step
  b.wait_s = watch.seconds();
  return b;
}

}  // namespace shardtrain::data
