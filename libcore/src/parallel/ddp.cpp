#include "shardtrain/parallel/ddp.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/stopwatch.hpp"
#include "shardtrain/comm/hierarchical.hpp"

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

std::vector<LanePiece> plan_lane_pieces(std::size_t n, int world, std::size_t block_elements) {
  const std::size_t W = std::size_t(std::max(world, 1)), chunk = ExactSum::kChunk;
  const std::size_t full = std::max<std::size_t>(1, (block_elements + chunk - 1) / chunk) * chunk;
  std::vector<LanePiece> pieces;
  for (std::size_t first = 0; first < n; first += W * pieces.back().block) {
    const std::size_t rest = n - first;
    // The last piece: the fewest whole chunks per rank that cover the rest.
    const std::size_t block = rest >= W * full ? full : (rest + W * chunk - 1) / (W * chunk) * chunk;
    pieces.push_back({first, block});
  }
  return pieces;
}

std::size_t lane_pieces_end(const std::vector<LanePiece>& pieces, int world) {
  return pieces.empty() ? 0 : pieces.back().first + std::size_t(world) * pieces.back().block;
}

std::size_t GradientReducer::piece_bytes(int world) {
  if (world <= 1) return 0;
  const std::size_t lane = ExactSum::kLanes * sizeof(std::uint64_t), block = kPieceBlock;
  return kPiecesInFlight * (lane + sizeof(float)) * block + std::size_t(world) * sizeof(float) * block;
}

GradientReducer::GradientReducer(Backend& backend, Communicator& comm, const ParameterRegistry& registry,
                                 float* grads, ReductionMode mode, std::size_t bucket_bytes, int micro_batches_per_rank,
                                 std::size_t piece_block)
    : backend_(backend),
      comm_(comm),
      grads_(grads),
      n_(registry.total()),
      mode_(mode),
      micro_batches_(micro_batches_per_rank),
      buckets_(plan_buckets(registry, bucket_bytes)) {
  if (mode != ReductionMode::kDeterministic) return;
  // A hierarchical group's reduce-scatter and all-gather are two-level only for nodes of equal
  // size and its all-reduce can be pipelined (hierarchical.hpp): there the lanes keep its all-reduce.
  const NodePlacement* placement = placement_of(comm);
  in_pieces_ = comm.size() > 1 && !(placement && placement->hierarchical());
  // One sum per sharding unit, so chunks match ZeRO's (exact_sum.hpp) and each unit can be reduced
  // as soon as backward completes it.
  units_ = registry.units();
  std::size_t covered = 0;
  for (const auto& u : units_) {
    if (u.begin != covered)
      throw Error(ExitCode::kInternal, "deterministic reduction: the sharding units do not cover the gradient buffer");
    unit_pieces_.push_back(plan_lane_pieces(u.size(), comm.size(), piece_block));
    unit_sums_.emplace_back(std::vector<std::size_t>{u.size()}, std::vector<std::string>{"unit " + u.name},
                            in_pieces_ ? lane_pieces_end(unit_pieces_.back(), comm.size()) : 0);
    covered = u.end;
  }
  if (covered != n_)
    throw Error(ExitCode::kInternal, "deterministic reduction: the sharding units do not cover the gradient buffer");
}

void GradientReducer::start_step() {
  exposed_s_ = 0;
  in_flight_.clear();
  lanes_in_flight_.clear();
  waiting_.clear(), reducing_.clear(), gathering_.clear();
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
    if (in_pieces_)
      for (const LanePiece& piece : unit_pieces_[u]) waiting_.push_back({u, piece, {}, {}, {}, {}});
    else if (comm_.size() > 1)
      lanes_in_flight_.push_back(comm_.all_reduce_async(sum.words(), ExactSum::kLanes * sum.size()));
  }
  if (!in_pieces_) return;  // finish() waits and decodes
  const Stopwatch watch;  // blocking: the pieces that must complete to make room for the new ones
  advance_pieces(kPiecesInFlight);
  exposed_s_ += watch.seconds();
}

void GradientReducer::advance_pieces(std::size_t keep) {
  const std::size_t lanes = ExactSum::kLanes;
  while (!waiting_.empty() || reducing_.size() + gathering_.size() > keep) {
    if (!waiting_.empty() && reducing_.size() < kPiecesInFlight) {
      PieceWork w = std::move(waiting_.front());
      waiting_.pop_front();
      w.summed.resize(lanes * w.piece.block);
      w.handle = comm_.reduce_scatter_async(unit_sums_[w.unit].words() + lanes * w.piece.first, w.summed.data(),
                                            w.summed.size());
      reducing_.push_back(std::move(w));
      continue;
    }
    if (reducing_.empty() || gathering_.size() >= kPiecesInFlight) {
      finish_gather(gathering_.front());
      gathering_.pop_front();
      continue;
    }
    start_gather(reducing_.front());
    gathering_.push_back(std::move(reducing_.front()));
    reducing_.pop_front();
  }
}

// The piece's reduce-scatter is waited for, this rank's block decoded, and the blocks all-gathered
// into the unit's gradient (a last piece reaching past the unit: into `tail`, copied at the end).
void GradientReducer::start_gather(PieceWork& w) {
  w.handle.wait();
  const std::size_t n = units_[w.unit].size(), W = std::size_t(comm_.size());
  const std::size_t mine = w.piece.first + std::size_t(comm_.rank()) * w.piece.block;
  w.decoded.assign(w.piece.block, 0.0f);
  if (mine < n) unit_sums_[w.unit].decode(w.summed.data(), mine, std::min(w.piece.block, n - mine), w.decoded.data());
  w.summed = {};
  float* out = grads_ + units_[w.unit].begin + w.piece.first;
  if (w.piece.first + W * w.piece.block > n) {
    w.tail.resize(W * w.piece.block);
    out = w.tail.data();
  }
  w.handle = comm_.all_gather_async(w.decoded.data(), out, w.piece.block);
}

void GradientReducer::finish_gather(PieceWork& w) {
  w.handle.wait();
  if (w.tail.empty()) return;
  const std::size_t n = units_[w.unit].size();
  std::copy(w.tail.begin(), w.tail.begin() + std::ptrdiff_t(n - w.piece.first), grads_ + units_[w.unit].begin + w.piece.first);
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
  if (deterministic && in_pieces_) {
    advance_pieces(0);
  } else if (deterministic) {
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
