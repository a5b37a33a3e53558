// ZeRO stages 1-3 (fsdp-train): the model state sharded over the data-parallel ranks.
//
//   stage 1: AdamW moments sharded. Every rank keeps full parameters and gradients; gradients are
//            reduce-scattered (fast) or canonically all-reduced (deterministic) per unit, each rank
//            updates its shard of the parameters with its shard of the moments, then an all-gather
//            per unit restores the full parameters.
//   stage 2: gradients sharded too: a unit's gradient lives in a transient unsharded buffer from
//            its backward until its reduce-scatter completes (launched as soon as backward has
//            completed the unit), then only this rank's shard is kept.
//   stage 3: parameters sharded too (FSDP): each unit is all-gathered just before its forward and
//            again before its backward (the next unit's all-gather prefetched asynchronously
//            while the current one computes) and freed after use; --no-reshard-after-forward
//            keeps a block gathered from its forward to its backward. The embeddings (tied to the
//            LM head, needed first in forward and last in backward) and ln_f stay gathered from
//            their forward to the end of their backward.
//
// Shards (ShardLayout): per sharding unit (ParameterRegistry::units(): embeddings, h.<l>, ln_f)
// the unit's flat range padded with zeros to a multiple of W x Backend::kReductionChunk; rank r
// owns the r-th of W equal slices. So every shard starts at a chunk boundary of its unit and the
// global gradient norm is rebuilt bitwise from per-chunk sums of squares (contract 2): each rank
// computes the chunk sums of its shards, they are all-gathered and added left to right per unit,
// then units in order, exactly as grad_norm_squared does over a full buffer.
//
// Deterministic mode (contract 2): per unit, the local micro-batches' gradients are summed in the
// same binary counter as GradientReducer (left + right), then the unit's padded buffer goes
// through Communicator::all_reduce_canonical (whose per-element sums do not depend on how the
// buffer is split) and each rank keeps its slice; with the sharded norm above and the same
// elementwise AdamW, ZeRO-1/2/3 at any power-of-two W are bitwise equal to DDP at W = 1.
//
// Checkpoints: each rank writes its shard's pieces of every logical tensor (params, both moments;
// padding left out), so DDP and ZeRO runs resume from each other's checkpoints (contract 3).
//
// Memory: every buffer the strategy allocates is a TrackedArray attributed to one category; the
// tracker keeps the current and peak bytes of each (memory_report()).
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/backend.hpp"
#include "shardtrain/parameters.hpp"
#include "shardtrain/strategy.hpp"

namespace shardtrain {

// One unit's place in the sharded layout of one rank.
struct UnitShard {
  std::size_t begin = 0, end = 0;   // the unit's flat range in the registry layout
  std::size_t padded = 0;           // padded length: a multiple of world x kReductionChunk
  std::size_t shard = 0;            // padded / world
  std::size_t padded_offset = 0;    // offset of the unit in a padded full buffer
  std::size_t shard_offset = 0;     // offset of this rank's slice in its flat shard buffer
  // This rank's owned flat range (registry indices), clipped to the unit: [own_begin, own_end).
  std::size_t own_begin = 0, own_end = 0;
  std::size_t size() const { return end - begin; }
};

class ShardLayout {
 public:
  ShardLayout(const ParameterRegistry& registry, int world, int rank);
  const std::vector<UnitShard>& units() const { return units_; }
  std::size_t shard_total() const { return shard_total_; }    // floats per rank per sharded buffer
  std::size_t padded_total() const { return padded_total_; }  // floats of a padded full buffer
  std::size_t max_padded() const { return max_padded_; }
  int world() const { return world_; }
  int rank() const { return rank_; }

 private:
  std::vector<UnitShard> units_;
  std::size_t shard_total_ = 0, padded_total_ = 0, max_padded_ = 0;
  int world_ = 1, rank_ = 0;
};

// Memory categories of the tracking allocator.
enum class MemoryCategory { kParameters, kGradients, kOptimizer, kGathered, kCommunication, kActivations };
constexpr int kNumMemoryCategories = 6;
const char* memory_category_name(MemoryCategory c);

// Current and peak bytes per category (and the peak of their sum) on one rank.
class MemoryTracker {
 public:
  void add(MemoryCategory c, std::size_t bytes);
  void sub(MemoryCategory c, std::size_t bytes);
  std::size_t current(MemoryCategory c) const { return current_[int(c)]; }
  std::size_t peak(MemoryCategory c) const { return peak_[int(c)]; }
  std::size_t peak_total() const { return peak_total_; }
  // {"parameters", "gradients", "optimizer", "gathered", "communication", "activations",
  //  "model_state" (peak params + grads + optimizer), "total" (peak of the sum)}
  nlohmann::json report() const;

 private:
  std::array<std::size_t, kNumMemoryCategories> current_{}, peak_{};
  std::size_t total_ = 0, peak_total_ = 0;
};

// A DeviceArray<float> whose bytes are attributed to a category while it lives.
class TrackedArray {
 public:
  TrackedArray() = default;
  TrackedArray(Backend& backend, std::size_t count, MemoryTracker& tracker, MemoryCategory category);
  ~TrackedArray() { reset(); }
  TrackedArray(TrackedArray&& o) noexcept { *this = std::move(o); }
  TrackedArray& operator=(TrackedArray&& o) noexcept;
  TrackedArray(const TrackedArray&) = delete;
  TrackedArray& operator=(const TrackedArray&) = delete;
  void reset();
  float* data() { return array_.data(); }
  const float* data() const { return array_.data(); }
  std::size_t size() const { return array_.size(); }
  bool empty() const { return array_.size() == 0; }

 private:
  DeviceArray<float> array_;
  MemoryTracker* tracker_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kParameters;
};

// Bytes per rank a layout will need, before building it (--memory-budget): model state by the
// formulas of ARCHITECTURE.md on the padded layout, the working (gathered) buffers of the
// schedule, communication staging and activations. Stage 0 is DDP.
struct MemoryEstimate {
  double model_state = 0, gathered = 0, communication = 0, activations = 0;
  double total() const { return model_state + gathered + communication + activations; }
};
MemoryEstimate estimate_memory(const ModelConfig& model, int zero_stage, int world, int micro_batch, int grad_accum,
                               bool deterministic);

// The --memory-budget check: "" when `budget_bytes` (> 0) suffices, else the refusal naming the
// bytes needed per rank and a stage or world size that fits.
std::string check_memory_budget(const ModelConfig& model, int zero_stage, int world, int micro_batch,
                                std::int64_t global_batch, bool deterministic, double budget_bytes);

std::unique_ptr<TrainingStrategy> make_zero_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                     const OptimizerConfig& optimizer, const StrategyOptions& options);

}  // namespace shardtrain
