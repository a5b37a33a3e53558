// Memory accounting for sharded training: a tracker of current and peak bytes per category, a
// tracked device array, and the up-front estimate the layout planner holds against --memory-budget.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/model/config.hpp"

namespace shardtrain {

// Memory categories of the tracking allocator.
enum class MemoryCategory { kParameters, kGradients, kOptimizer, kGathered, kCommunication, kActivations };
constexpr int kNumMemoryCategories = 6;
const char* memory_category_name(MemoryCategory c);

// One rank's memory, in bytes: what a strategy reports (Strategy::memory_report) and the run
// summary records ("memory_bytes_rank0", one per rank in "memory_bytes_by_rank"; docs/FORMATS.md).
// JSON: {"parameters", "gradients", "optimizer", "gathered", "communication", "activations",
// "model_state", "total"}, for ZeRO "formula_model_state" and "zero_stage", and in a run summary
// "resident_peak", "process_baseline" and "unaccounted".
struct MemoryReport {
  std::array<double, kNumMemoryCategories> peak{};  // peak bytes by MemoryCategory
  double model_state = 0;  // peak of parameters + gradients + optimizer
  double total = 0;        // peak of the sum of every category
  // ZeRO: the model-state formula of docs/ARCHITECTURE.md for this stage and DP size (0: DDP).
  double formula_model_state = 0;
  int zero_stage = 0;
  // What the process itself held (base/process_stats.hpp), beside the tracked categories; the
  // trainers fill them in the run summary (0: not measured: a strategy's own report, summaries
  // written before the fields existed):
  double resident_peak = 0;     // the rank's largest resident size during the run (VmHWM)
  double process_baseline = 0;  // resident just before the run's state was allocated: code,
                                // libraries, MPI's buffers, the dataset's index
  // What neither the categories nor the baseline name: resident_peak - process_baseline - total
  // (the allocator's slack, buffers of libraries, a checkpoint's host copy; negative where
  // tracked memory was never touched). 0 when not measured.
  double unaccounted() const { return resident_peak > 0 ? resident_peak - process_baseline - total : 0.0; }
  double bytes(MemoryCategory c) const { return peak[std::size_t(c)]; }
  nlohmann::json to_json() const;
  // JsonFile's rule: UsageError naming the file and the missing or mistyped field by pointer.
  static MemoryReport from_json(const JsonFile& file, const std::string& at = "");
  bool operator==(const MemoryReport&) const = default;
};

// Current and peak bytes per category (and the peak of their sum) on one rank.
class MemoryTracker {
 public:
  void add(MemoryCategory c, std::size_t bytes);
  void sub(MemoryCategory c, std::size_t bytes);
  MemoryReport report() const;

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
// schedule, communication staging and activations. Stage 0 is DDP. Under tensor parallelism
// (tp > 1, world = DP x tp) every term is the formula's for the rank's LOCAL model (P/T-ish: the
// split matrices and wte divided by T, the replicated LayerNorms, wpe and row-parallel biases
// whole) sharded over the DP = world / tp ranks, and the activations are GptModel's TP terms
// (the N*C residual-stream tensors replicated, the attention, MLP and logit ones divided by T).
struct MemoryEstimate {
  double model_state = 0, gathered = 0, communication = 0, activations = 0;
  double total() const { return model_state + gathered + communication + activations; }
};
// `device`: the backend the layout will run on; it decides what attention keeps for backward
// (backend.hpp attention_state_elements_for), the one term that differs between devices.
MemoryEstimate estimate_memory(const ModelConfig& model, int zero_stage, int world, int micro_batch, int grad_accum,
                               bool deterministic, int tp, DeviceKind device);
// Whether an estimate fits a --memory-budget, and what to say when it does not, is the layout
// planner's (layout_plan.hpp).

// What a rank's process holds besides the estimate's categories, for predicting its resident peak
// (scale-bench plan's resident column, and what --memory-budget holds: estimate + this): on the CPU
// 0.4 GB, measured at GPT-2 small on 1 and 2 ranks (2026-12-06, docs/PERFORMANCE.md "GPT-2 small"):
// the summary's process_baseline (code, libraries, MPI, the dataset's index: 196 MB) plus what it
// could not name (allocator slack and libraries' buffers: 145-307 MB). On a GPU the budget is
// device memory, which this does not describe: 0 (not measured).
double process_overhead_bytes(DeviceKind device);

}  // namespace shardtrain
