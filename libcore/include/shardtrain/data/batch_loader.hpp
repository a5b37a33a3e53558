// Batch loader: assembles this rank's tokens for each step in a prefetch thread, one step ahead.
//
// The step starting at sampler state s uses the samples that rank_step_samples() (sampler.hpp)
// names for (s, micro_batch, grad_accum, dp_rank, dp_size); the state after it is
// s advanced by the global batch micro_batch * grad_accum * dp_size. The loader starts preparing
// the first step in its constructor and the following one as soon as next() hands a step out, so
// the trainer blocks only when reading is slower than a step; StepBatch::wait_s is that blocked
// time (the step log's data column).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "shardtrain/data/sampler.hpp"
#include "shardtrain/data/selection.hpp"

namespace shardtrain::data {

class BatchLoader {
 public:
  struct StepBatch {
    // grad_accum x micro_batch x (seq_len + 1) tokens, micro-batch-major: micro-batch a, row j,
    // token t is tokens[(a * micro_batch + j) * (seq_len + 1) + t]. Inputs are t in [0, seq_len),
    // targets t in [1, seq_len].
    std::vector<int32_t> tokens;
    std::vector<uint64_t> sample_ids;  // grad_accum * micro_batch, same order as the rows
    SamplerState state_before;         // global state at the start of this step
    SamplerState state_after;          // global state to checkpoint after this step
    double wait_s = 0.0;               // seconds next() blocked waiting for the prefetch thread
    double load_s = 0.0;               // seconds the prefetch thread spent assembling this batch
  };

  // `data` must outlive the loader. seq_len must equal data.seq_len(); micro_batch, grad_accum >= 1;
  // 0 <= dp_rank < dp_size. Throws UsageError otherwise or when the data has no train samples.
  BatchLoader(const TrainingData& data, uint64_t seed, SamplerState start, int seq_len,
              int micro_batch, int grad_accum, int dp_rank, int dp_size);
  ~BatchLoader();  // stops and joins the prefetch thread
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next step's batch. Rethrows any error the prefetch thread hit.
  StepBatch next();

  const EpochSampler& sampler() const { return sampler_; }
  uint64_t global_batch() const { return layout_.global_batch(); }

 private:
  void run();
  StepBatch assemble(SamplerState state) const;

  const TrainingData& data_;
  EpochSampler sampler_;
  BatchLayout layout_;
  int seq_len_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<StepBatch> ready_;  // the prefetched step, if done
  SamplerState next_state_;         // state at which the thread prepares the next step
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace shardtrain::data
