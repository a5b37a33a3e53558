// Data-parallel gradient reduction (DDP): turns each rank's micro-batch gradients into the
// gradient of the global batch on every rank.
//
// Fast mode: gradients accumulate over a rank's micro-batches in the model's gradient buffer;
// during the LAST micro-batch's backward, buckets of about bucket_bytes (whole tensors, in reverse
// layer order: the order backward completes them) are all-reduced asynchronously as soon as
// backward has passed their first tensor, so communication overlaps the rest of backward.
// finish() waits for the buckets still in flight; that wait is the exposed communication.
//
// Deterministic mode (contract 2 of docs/ARCHITECTURE.md): each micro-batch's gradient is computed alone (the buffer is
// zeroed before it) and joins a reproducible integer sum (exact_sum.hpp), one per sharding unit,
// as ZeRO has them. During the LAST micro-batch's backward, as soon as backward has completed a
// unit's gradient, the unit's sum takes it and agrees its digit windows with the group (a small
// blocking all-gather); then, piece by piece (plan_lane_pieces), the group reduce-scatters the
// piece's 64-bit lanes, each rank decodes its block to fp32 and the blocks are all-gathered
// straight into the gradient buffer: 16 + 4 bytes per element cross a link (W - 1) / W times,
// against 2 x 16 for an all-reduce of the lanes, and each rank decodes 1/W of them (on a
// hierarchical group, whose two-level all-reduce sends 1/L of the bytes across nodes and can be
// pipelined, the lanes are all-reduced whole as before and decoded in finish()). At most
// kPiecesInFlight pieces reduce-scatter and as many all-gather at once (their buffers are all the
// pieces hold); the pieces advance at fixed points (each time
// backward completes units, and in finish()), the same on every rank, so the collectives' order
// is too. finish() adds the units backward completed last, drains the pieces, and adds the loss
// sums in global micro-batch order. The result is bitwise independent of the number of ranks
// and of the accumulation count, for any of either (and of the ZeRO stage, which uses the same
// rule), and of when each unit was reduced (docs/PERFORMANCE.md "Deterministic mode" for its cost).
//
// Every token's loss has weight 1/global_tokens (train_step.hpp), so the reduced sum IS the
// global mean's gradient: no division after the all-reduce.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/parallel/exact_sum.hpp"

namespace shardtrain {

enum class ReductionMode { kFast, kDeterministic };

// A contiguous range [begin, end) of the flat gradient buffer, made of whole tensors.
struct GradientBucket {
  std::size_t begin = 0, end = 0;
};

// Buckets of about `bucket_bytes` (at least one tensor each), from the end of the flat buffer
// towards its start, i.e. in the order backward completes the tensors. bucket_bytes 0: one
// bucket per tensor.
std::vector<GradientBucket> plan_buckets(const ParameterRegistry& registry, std::size_t bucket_bytes);

// Deterministic mode's reduction pieces of one unit of n elements over `world` ranks: piece j
// covers elements [first, first + world x block) of the unit, rank r decoding [first + r block,
// first + (r + 1) block) clipped to n. Every block is whole chunks (ExactSum::kChunk) of at most
// `block_elements` (rounded up to a chunk); only the last piece may reach past n (by less than
// world chunks: the lanes' zero padding, ExactSum's padded_size = lane_pieces_end(pieces, world)).
struct LanePiece {
  std::size_t first = 0, block = 0;
};
std::vector<LanePiece> plan_lane_pieces(std::size_t n, int world, std::size_t block_elements);
std::size_t lane_pieces_end(const std::vector<LanePiece>& pieces, int world);

class GradientReducer {
 public:
  // Deterministic mode: elements per rank per piece (16 MB of lanes), and how many pieces may be
  // reduce-scattering (each holding its summed block, 16 bytes per element) and how many
  // all-gathering (each holding its decoded block, 4 bytes per element) at once.
  static constexpr std::size_t kPieceBlock = std::size_t(1) << 20;
  static constexpr std::size_t kPiecesInFlight = 4;
  // Host bytes deterministic mode's pieces hold at most at W ranks, beside the exact sums' lanes
  // (16 bytes per element): reduce-scatter outputs, decoded blocks and a last piece's all-gather
  // output (0 at W = 1). Not the comm engine's receive space for the reduce-scatters ((W - 1) x 16
  // x kPieceBlock bytes), which the engine reports (CommStats::scratch_bytes).
  static std::size_t piece_bytes(int world);

  // grads: the model's flat gradient buffer (registry.total() floats, host-addressable for the
  // MPI transport and, in deterministic mode, for the exact sum). comm: the data-parallel group;
  // micro_batches_per_rank: A (the global batch has A x comm.size() micro-batches);
  // piece_block: deterministic mode's elements per rank per piece (plan_lane_pieces).
  GradientReducer(Backend& backend, Communicator& comm, const ParameterRegistry& registry, float* grads,
                  ReductionMode mode, std::size_t bucket_bytes, int micro_batches_per_rank,
                  std::size_t piece_block = kPieceBlock);

  ReductionMode mode() const { return mode_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  // Call order per step (the shared micro-batch loop, src/parallel/micro_batch_loop.hpp):
  // start_step(); for each micro-batch m: before_backward(m), the model's backward (with
  // gradient_ready() wired to the model's ready hook), after_backward(m); then
  // finish(local loss sum) -> global loss sum, gradients reduced.
  void start_step();
  // Zeroes the gradient buffer where the mode needs it.
  void before_backward(int micro_batch);
  // Backward has completed the gradients of [ready_from, end) (the model's hook).
  void gradient_ready(std::size_t ready_from);
  // Deterministic mode: the micro-batch's gradient joins the exact sums (the last micro-batch's:
  // what gradient_ready has not added yet is added in finish()).
  void after_backward(int micro_batch);
  // Waits for (or runs) the reduction and sums this rank's micro-batch loss sums (in local
  // order) over the ranks (reduce_loss_sums, exact_sum.hpp); returns the global loss sum.
  // Gradients then hold the global-batch gradient on every rank.
  double finish(const std::vector<double>& micro_batch_loss_sums);

  // Seconds this step spent blocked waiting for communication (comm_exposed_s).
  double exposed_seconds() const { return exposed_s_; }

 private:
  void launch_ready_buckets(std::size_t ready_from);
  // Deterministic mode, last micro-batch: every unit not yet taken whose gradient lies in
  // [ready_from, end) joins its sum, agrees its windows and has its lanes all-reduced (W > 1).
  void reduce_ready_units(std::size_t ready_from);
  // Deterministic mode, W > 1: moves the pieces along until at most `keep` are between launch and
  // end (0: all done). Called at fixed points only, so every rank issues the same collectives.
  void advance_pieces(std::size_t keep);

  Backend& backend_;
  Communicator& comm_;
  float* grads_;
  std::size_t n_;
  ReductionMode mode_;
  int micro_batches_;
  std::vector<GradientBucket> buckets_;

  // Fast mode: buckets launched in the current (last) micro-batch.
  bool overlap_active_ = false;
  std::size_t next_bucket_ = 0;
  std::vector<CollectiveHandle> in_flight_;

  // Deterministic mode: per sharding unit (registry order), the exact sum of this rank's
  // micro-batch gradients and its pieces; once the last micro-batch has reached a unit, its pieces
  // queue up (waiting), then reduce-scatter (reducing), then all-gather (gathering).
  struct PieceWork {
    std::size_t unit = 0;
    LanePiece piece;
    std::vector<std::uint64_t> summed;  // this rank's block of the piece's lanes, summed
    std::vector<float> decoded;         // ... decoded: the all-gather's input
    std::vector<float> tail;            // the last piece's all-gather output when it reaches past the unit
    CollectiveHandle handle;
  };
  void start_gather(PieceWork& w);
  void finish_gather(PieceWork& w);
  std::vector<ParameterUnit> units_;
  std::vector<ExactSum> unit_sums_;
  std::vector<std::vector<LanePiece>> unit_pieces_;
  std::deque<PieceWork> waiting_, reducing_, gathering_;
  bool in_pieces_ = false;  // W > 1 on a flat group; else the lanes' all-reduce (lanes_in_flight_)
  std::vector<CollectiveHandle> lanes_in_flight_;
  std::size_t units_pending_ = 0;  // last micro-batch: units [0, units_pending_) not yet reduced
  bool last_micro_batch_ = false;

  double exposed_s_ = 0;
};

}  // namespace shardtrain
