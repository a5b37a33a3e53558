#include "shardtrain/parallel/memory.hpp"

#include <algorithm>
#include <cmath>

#include "shardtrain/base/json_record.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/model/gpt.hpp"
#include "shardtrain/parallel/ddp.hpp"
#include "shardtrain/parallel/exact_sum.hpp"
#include "shardtrain/parallel/shard_layout.hpp"

namespace shardtrain {

const char* memory_category_name(MemoryCategory c) {
  static const char* const names[] = {"parameters", "gradients", "optimizer", "gathered", "communication", "activations"};
  return names[int(c)];
}

void MemoryTracker::add(MemoryCategory c, std::size_t bytes) {
  current_[int(c)] += bytes;
  peak_[int(c)] = std::max(peak_[int(c)], current_[int(c)]);
  total_ += bytes;
  peak_total_ = std::max(peak_total_, total_);
}

void MemoryTracker::sub(MemoryCategory c, std::size_t bytes) {
  current_[int(c)] -= bytes;
  total_ -= bytes;
}

namespace {

// MemoryReport's keys beside the categories' (each named by memory_category_name), once: the ZeRO
// part written for a ZeRO stage, the process part where it was measured (absent: 0).
auto memory_fields() {
  using namespace json_fields;
  return std::tuple{key("model_state", &MemoryReport::model_state), key("total", &MemoryReport::total),
                    when([](const MemoryReport& r) { return r.zero_stage > 0; },
                         key("formula_model_state", &MemoryReport::formula_model_state), key("zero_stage", &MemoryReport::zero_stage)),
                    when([](const MemoryReport& r) { return r.resident_peak > 0; }, key("resident_peak", &MemoryReport::resident_peak),
                         key("process_baseline", &MemoryReport::process_baseline),
                         written("unaccounted", &MemoryReport::unaccounted))};
}

}  // namespace

nlohmann::json MemoryReport::to_json() const {
  nlohmann::json j = json_fields::write_fields(*this, memory_fields());
  for (int c = 0; c < kNumMemoryCategories; ++c) j[memory_category_name(MemoryCategory(c))] = peak[std::size_t(c)];
  return j;
}

MemoryReport MemoryReport::from_json(const JsonFile& f, const std::string& at) {
  MemoryReport r;
  json_fields::require_object(f, at);
  for (int c = 0; c < kNumMemoryCategories; ++c)
    r.peak[std::size_t(c)] = f.number(json_fields::field(at, memory_category_name(MemoryCategory(c))));
  json_fields::read_fields(f, at, r, memory_fields());
  return r;
}

MemoryReport MemoryTracker::report() const {
  MemoryReport r;
  for (int c = 0; c < kNumMemoryCategories; ++c) r.peak[std::size_t(c)] = double(peak_[c]);
  r.model_state = double(peak_[0] + peak_[1] + peak_[2]);
  r.total = double(peak_total_);
  return r;
}

TrackedArray::TrackedArray(Backend& backend, std::size_t count, MemoryTracker& tracker, MemoryCategory category)
    : array_(backend, count), tracker_(&tracker), category_(category) {
  tracker.add(category, array_.bytes());
}

TrackedArray& TrackedArray::operator=(TrackedArray&& o) noexcept {
  if (this != &o) {
    reset();
    array_ = std::move(o.array_);
    tracker_ = o.tracker_;
    category_ = o.category_;
    o.tracker_ = nullptr;
  }
  return *this;
}

void TrackedArray::reset() {
  if (tracker_ && array_.size()) tracker_->sub(category_, array_.bytes());
  array_.reset();
  tracker_ = nullptr;
}

// ---------------------------------------------------------------- the estimate --------------------

double process_overhead_bytes(DeviceKind device) { return device == DeviceKind::kCpu ? 0.4e9 : 0.0; }

MemoryEstimate estimate_memory(const ModelConfig& model, int stage, int world, int micro_batch, int grad_accum,
                               bool deterministic, int tp, DeviceKind device) {
  const ParameterRegistry registry(model, {tp, 0});  // every TP rank's local model has this size
  world /= tp;                                       // the state is sharded over the DP axis
  const ShardLayout layout(registry, world, 0);
  const double P = double(registry.total()), Ppad = double(layout.padded_total()), S = double(layout.shard_total());
  const auto& u = layout.units();
  double max_block = 0;
  for (std::size_t i = 1; i + 1 < u.size(); ++i) max_block = std::max(max_block, double(u[i].padded));
  const double working = double(u.front().padded + u.back().padded) + 2 * max_block;  // floats
  double max_unit = 0;
  for (const auto& unit : u) max_unit = std::max(max_unit, double(unit.padded));
  // Deterministic mode's exact sums (exact_sum.hpp), two int64 lanes per element: DDP's covers the
  // whole gradient; ZeRO's live per unit from its first micro-batch to its reduce-scatter, so all
  // of them with accumulation, about two units' worth without.
  const double lane_bytes = double(ExactSum::kLanes * sizeof(std::uint64_t));
  const double exact = !deterministic ? 0.0
                       : stage == 0   ? lane_bytes * P
                       : grad_accum > 1 ? lane_bytes * Ppad
                                        : lane_bytes * (max_unit + max_block);
  // Reduce-scatters of host buffers run on the comm engine's pairwise exchange
  // (comm/algorithms.hpp), which keeps (W - 1) received blocks of the largest call's; a device's
  // collectives library keeps its own. ZeRO's largest: a unit's shard (fp32, or the lanes).
  const auto exchange_scratch_for = [&](double block_bytes) {
    return world > 1 && device == DeviceKind::kCpu ? double(world - 1) * block_bytes : 0.0;
  };
  const double exchange_scratch =
      exchange_scratch_for(double(layout.max_padded() / world) * (deterministic ? lane_bytes : 4.0));
  MemoryEstimate e;
  e.activations = double(GptModel::activation_bytes_for(model, micro_batch, tp, device));
  switch (stage) {
    case 0: {
      e.model_state = 16 * P;
      e.gathered = exact;
      // The comm engine's halving/doubling receive space (CommStats::scratch_bytes), kept from the
      // first step: half the largest all-reduce, the bucket that holds the largest tensor (the
      // tied embedding: at GPT-2 small 77 MB, the default 4 MiB buckets being smaller). Fast mode.
      double largest = 0;
      for (const auto& t : registry.tensors()) largest = std::max(largest, double(t.numel));
      if (world > 1 && !deterministic) e.communication = 4 * (largest / 2 + 1);
      // Deterministic mode: the reduction pieces in flight (ddp.hpp), beside the lanes, and the
      // engine's receive space for one piece's reduce-scatter (DDP's pieces are not ZeRO's shards).
      if (deterministic && world > 1)
        e.communication = double(GradientReducer::piece_bytes(world)) +
                          exchange_scratch_for(lane_bytes * double(GradientReducer::kPieceBlock));
      break;
    }
    // Stages 1-3 stage their collectives only between ranks: one rank has no communication buffers.
    case 1:
      e.model_state = 8 * Ppad + 8 * S;
      e.communication = world > 1 ? 8 * S + exchange_scratch : 0.0;
      e.gathered = exact;
      break;
    case 2:
      e.model_state = 4 * Ppad + 12 * S;
      e.communication = world > 1 ? 8 * S + exchange_scratch : 0.0;
      e.gathered = 4 * working + exact;
      break;
    default:
      e.model_state = 16 * S;
      e.communication =
          world > 1 ? (deterministic ? lane_bytes : 4) * double(layout.max_padded() / world) + exchange_scratch : 0.0;
      e.gathered = 4 * working + 4 * working + exact;
      break;
  }
  return e;
}

}  // namespace shardtrain
