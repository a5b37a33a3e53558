// Deterministic mode's reduction rule (contract 2 of docs/ARCHITECTURE.md), shared by DDP and every ZeRO stage: an exact,
// order-independent sum of the per-micro-batch fp32 gradients, converted back to fp32 once, and
// the loss sums added in global micro-batch order. The result depends only on the global batch's
// micro-batches, never on how they are spread over ranks and accumulation steps, so one rule holds
// for every world size W and accumulation count A (W = 3 gives what W = 2 or W = 1 gives).
//
// Representation: fixed point in 64-bit words, one exponent per chunk of kChunk consecutive
// elements. A micro-batch's values in a chunk are rounded (to nearest, ties to even) to the grid
// 2^k, k = e + 1 - kBits, where 2^e <= max |value| of that chunk in that micro-batch < 2^(e+1):
// each value keeps kBits = 40 significant bits at the chunk's largest magnitude (fp32 keeps 24),
// and full fp32 precision down to 2^-16 of it. Rounding a value depends on the value and its own
// micro-batch only. Contributions on different grids are added exactly on the finer grid (a left
// shift), in wrapping 64-bit arithmetic, so the words are the exact sum modulo 2^64 whatever the
// order or grouping; the group then agrees on each chunk's finest grid G (all-gather of the
// per-chunk grid range), every rank shifts its words onto G, and an ordinary integer sum
// (all-reduce or reduce-scatter; any algorithm, any W: integer addition is associative) finishes
// the sum. The true sum is recovered from the words when it cannot exceed 2^62 in magnitude:
//   kBits + (K_max - G) + ceil(log2 N) <= 62
// (K_max the coarsest grid of the chunk, N the global number of micro-batches), i.e. a chunk's
// largest magnitude may differ between micro-batches by up to 2^(22 - ceil(log2 N)) (2^16 at
// N = 64). agree() checks that bound on the global values, so every rank of every layout decides
// the same; beyond it, NumericalError names the elements (lower --lr or use fast mode). A chunk
// with an Inf or NaN in any micro-batch decodes to NaN, which the step's finite check refuses.
// Decoding: (double)(int64 words) x 2^G, rounded to fp32: a function of the exact sum only.
//
// Cost, next to the canonical fp32 tree it replaces (power-of-two W only, halving/doubling):
//   * communicated: 8 bytes per element (the tree: 4), all-reduced (DDP) or reduce-scattered
//     (ZeRO), plus the grid all-gather: 8 bytes per chunk of 256 elements per rank (W x 8 bytes
//     per chunk received), i.e. 1/32 of a word per element at W = 8;
//   * computed: per micro-batch one pass that finds the chunk maxima (integer max of the bit
//     patterns) and one that converts and adds (the tree: one copy and one fp32 addition); one
//     decode pass per step;
//   * memory: 8 bytes per element of accumulator for the elements being reduced (the tree held
//     log2(A) + 1 fp32 buffers).
//   Measured at the foundation configuration: docs/PERFORMANCE.md "Deterministic mode".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

class ExactSum {
 public:
  static constexpr std::size_t kChunk = 256;  // elements sharing one grid exponent; divides Backend::kReductionChunk
  static constexpr int kBits = 40;            // magnitude bits of one contribution on its own grid
  static constexpr int kSumBits = 62;         // the recovered sum's magnitude stays below 2^kSumBits

  // An empty accumulator of the concatenated segments (host memory; n = their total length).
  // Chunks restart at every segment: a segment's chunk j covers its elements [j kChunk,
  // (j+1) kChunk). Callers make the segments the sharding units (ParameterRegistry::units(), in
  // ZeRO padded with zeros), so a chunk holds the same elements in DDP and in every ZeRO stage.
  explicit ExactSum(const std::vector<std::size_t>& segments = {});

  std::size_t size() const { return n_; }
  std::size_t chunks() const { return grid_lo_.size(); }
  // Host bytes held (words and per-chunk grids).
  std::size_t bytes() const { return words_.size() * sizeof(std::uint64_t) + grid_lo_.size() * 3 * sizeof(std::size_t); }
  // Back to empty (no contributions).
  void clear();
  // Adds one micro-batch's values[0..n) (host-addressable).
  void add(const float* values);

  // Collective over `comm` (every rank, same n): agrees each chunk's finest grid with the group
  // (an all-gather of 8 bytes per chunk), moves this rank's words onto it and checks the bound
  // above for `micro_batches` = N, the global batch's micro-batch count. Throws NumericalError
  // (on every rank alike) naming `what` and the elements when a chunk is beyond the bound. With
  // one rank it only computes the grids.
  void agree(Communicator& comm, std::int64_t micro_batches, const std::string& what);
  // After agree(): the words to sum over the group as uint64 (wrapping) integers, n of them.
  std::uint64_t* words() { return words_.data(); }
  // After agree(): decodes the summed words of elements [first, first + count) (summed[0..count))
  // to fp32 in out[0..count). `first` must be the start of a chunk.
  void decode(const std::uint64_t* summed, std::size_t first, std::size_t count, float* out) const;

 private:
  std::size_t n_ = 0;
  std::vector<std::size_t> chunk_first_;  // chunk c is [chunk_first_[c], chunk_first_[c + 1])
  std::vector<std::uint64_t> words_;
  // Per chunk: the finest (lo) and coarsest (hi) grid exponent of the contributions so far;
  // kEmpty/-kEmpty when none, hi = kNonFinite once a non-finite value was seen.
  std::vector<std::int32_t> grid_lo_, grid_hi_;
};

// The exact DDP reduction: agree(), a uint64 all-reduce of the words, decode into out[0..n).
void exact_all_reduce(Communicator& comm, ExactSum& sum, std::int64_t micro_batches, const std::string& what, float* out);

// The global loss sum of a step in deterministic mode: every rank's per-micro-batch loss sums
// (in local order; every rank has the same count) are all-gathered and added left to right in
// global micro-batch order (rank r holds global micro-batches [r A, (r+1) A)), so the sum is the
// same for every layout. Fast mode: this rank's sums left to right, then a library all-reduce.
// Collective over `comm`.
double reduce_loss_sums(Communicator& comm, bool deterministic, const std::vector<double>& micro_batch_loss_sums);

}  // namespace shardtrain
