// Deterministic mode's reduction rule (contract 2 of docs/ARCHITECTURE.md), shared by DDP and every ZeRO stage: a
// reproducible sum of the per-micro-batch fp32 gradients in integers, converted back to fp32 once,
// and the loss sums added in global micro-batch order. The result depends only on the global
// batch's micro-batches, never on how they are spread over ranks and accumulation steps, so one
// rule holds for every world size W and accumulation count A (W = 3 gives what W = 2 or W = 1
// gives), and it holds for ANY finite values: nothing is refused but NaN and Inf.
//
// The rule (binned summation at absolute positions, ReproBLAS's idea, with 40-bit digits):
//   * Every fp32 value is a multiple of 2^-149 below 2^128: a 277-bit fixed-point number. Its bits
//     are cut into digits of kDigitBits = 40 at ABSOLUTE positions: digit d holds the bits of
//     2^(40d - 149) .. 2^(40d - 110). A value's most significant bit lies in digit
//     D(v) = floor((floor(log2 |v|) + 149) / 40).
//   * A chunk (kChunk consecutive elements) keeps kLanes = 2 digits: T and T - 1, where
//     T = max(1, largest D(v) over every value of the chunk in every micro-batch of the global
//     batch). Each value is truncated toward zero to a multiple of 2^B, B = 40 (T - 1) - 149, and
//     the truncated values are added exactly; the exact sum is rounded once to fp32 (nearest, ties
//     to even; subnormals as IEEE; beyond the fp32 range it is +-Inf, which the step's finite check
//     refuses like fast mode's overflow).
//   So a chunk's largest magnitude keeps at least 41 bits (every element within 2^-17 of it keeps
//   all 24 of its bits); smaller elements keep their bits down to 2^B (at least 41 bits below the
//   chunk's largest value of the step). T depends on the global maximum only, a max is
//   order-independent, and dropping whole digits commutes with adding them, so the result is a
//   function of the multiset of values, whatever the order or grouping.
// How: per micro-batch and chunk, each value's magnitude, scaled by 2^-B, is split into its digit
// T (integer part of / 2^40) and digit T - 1 (the rest, truncated), both below 2^40, signed,
// added into two int64 lanes per element (interleaved: lanes [2i, 2i + 1] = digits T, T - 1 of
// element i). When a later micro-batch raises the local T by one, lane T becomes lane T - 1 and
// lane T is zeroed (two or more: both zeroed): truncating a sum of truncated digits is what the
// rule keeps. agree() all-gathers each chunk's local T (4 bytes per chunk), every rank moves its
// lanes to the global T, and an ordinary integer all-reduce or reduce-scatter of the lanes (any
// algorithm, any W: integer addition is associative) finishes the sum. A lane adds at most N
// pieces below 2^40 (N the global micro-batch count), exact while N < 2^23 = kMaxMicroBatches;
// agree() refuses more (a configuration limit, known at step 1, never a mid-run one).
// Decoding: lane T x 2^(B + 40) + lane T - 1 x 2^B is formed exactly (two doubles, TwoSum, rounded
// to odd; 128-bit integers when a lane exceeds 2^53) and converted to fp32 once: a function of the
// kept exact sum only.
// Refused: a NaN or Inf in any micro-batch: agree() throws NumericalError on every rank alike,
// naming `what` (the unit), the first such element and value kind, and how many chunks hold one;
// the micro-batch loop prefixes the step.
//
// Cost, next to fast mode's fp32 all-reduce (4 bytes per element):
//   * communicated: 16 bytes per element (two int64 lanes), reduce-scattered (ZeRO; DDP then
//     all-gathers the decoded fp32, ddp.hpp), plus the digit all-gather: 4 bytes per chunk of 256
//     elements per rank (W x 4 bytes per chunk received), i.e. 1/64 of a lane per element at W = 8;
//   * computed: per micro-batch one pass that finds the chunk maxima (integer max of the bit
//     patterns) and one that splits and adds (a few double operations per element, vectorised;
//     the step's first micro-batch stores its digits instead of adding them, so nothing zeroes
//     the lanes); one decode pass per step over the elements a rank owns;
//   * memory: 16 bytes per element of accumulator for the elements being reduced.
//   Measured at the foundation configuration: docs/PERFORMANCE.md "Deterministic mode".
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

class ExactSum {
 public:
  static constexpr std::size_t kChunk = 256;  // elements sharing one digit window; divides Backend::kReductionChunk
  static constexpr int kDigitBits = 40;       // bits of one digit (a lane adds pieces below 2^40)
  static constexpr std::size_t kLanes = 2;    // int64 lanes (digits T and T - 1) per element
  static constexpr std::int64_t kMaxMicroBatches = std::int64_t(1) << 23;  // lanes stay below 2^63

  // An empty accumulator of the concatenated segments (host memory; n = their total length).
  // Chunks restart at every segment: a segment's chunk j covers its elements [j kChunk,
  // (j+1) kChunk). Callers make the segments the sharding units (ParameterRegistry::units(), in
  // ZeRO padded with zeros), so a chunk holds the same elements in DDP and in every ZeRO stage.
  // `names` (empty, or one per segment) name the segments in errors.
  // `padded_size` > the segments' total: the lanes are followed by zero lanes up to that many
  // elements, so that equal-block reduce-scatters of words() can cover the tail (their zeros are
  // never added to, and decode() is not asked for them).
  explicit ExactSum(const std::vector<std::size_t>& segments = {}, std::vector<std::string> names = {},
                    std::size_t padded_size = 0);

  std::size_t size() const { return n_; }
  std::size_t chunks() const { return top_.size(); }
  // Host bytes held (lanes with their padding, and per-chunk digits).
  std::size_t bytes() const { return word_count_ * sizeof(std::uint64_t) + top_.size() * (sizeof(std::int32_t) + sizeof(std::size_t)); }
  // Back to empty (no contributions): resets the chunks' windows, not the lanes (see words_).
  void clear();
  // Adds one micro-batch's values[0..n) (host-addressable).
  void add(const float* values);

  // Collective over `comm` (every rank, same n): agrees each chunk's digit window with the group
  // (an all-gather of 4 bytes per chunk) and moves this rank's lanes onto it. Throws, on every rank
  // alike, NumericalError naming `what` and the element when any micro-batch of any rank held a
  // NaN or Inf, and Error(kUsage) when `micro_batches` (N, the global batch's micro-batch count)
  // exceeds kMaxMicroBatches. With one rank it only checks.
  void agree(Communicator& comm, std::int64_t micro_batches, const std::string& what);
  // After agree(): the lanes to sum over the group as uint64 (wrapping) integers, kLanes per
  // element, max(size(), padded_size) x kLanes of them (element i's lanes at [kLanes i, kLanes (i +
  // 1)); the padding's are zero).
  std::uint64_t* words() { return words_.get(); }
  // After agree(): decodes the summed lanes of elements [first, first + count) (summed[0 ..
  // kLanes count)) to fp32 in out[0..count). `first` must be the start of a chunk.
  void decode(const std::uint64_t* summed, std::size_t first, std::size_t count, float* out) const;

 private:
  std::string element_name(std::size_t i, const std::string& what) const;

  std::size_t n_ = 0;
  std::vector<std::size_t> chunk_first_;  // chunk c is [chunk_first_[c], chunk_first_[c + 1])
  std::vector<std::size_t> segment_first_;  // segment s starts at segment_first_[s]
  std::vector<std::string> names_;
  std::size_t word_count_ = 0;
  // Not initialised: a chunk's lanes are written by its first add() (or zeroed by agree() when it
  // held nothing), so a step never spends a pass zeroing them; the padding is zeroed once.
  std::unique_ptr<std::uint64_t[]> words_;
  // Per chunk: the top digit T of the window so far; kEmpty before any nonzero value, and from
  // kNonFinite on: the first non-finite element seen (kNonFinite + 2 x offset + 1 if NaN).
  std::vector<std::int32_t> top_;
};

// The exact sum over a group in one call: agree(), a uint64 all-reduce of the lanes, decode into
// out[0..n) (the reference the tests hold DDP's reduction in pieces, ddp.hpp, to).
void exact_all_reduce(Communicator& comm, ExactSum& sum, std::int64_t micro_batches, const std::string& what, float* out);

// The global loss sum of a step in deterministic mode: every rank's per-micro-batch loss sums
// (in local order; every rank has the same count) are all-gathered and added left to right in
// global micro-batch order (rank r holds global micro-batches [r A, (r+1) A)), so the sum is the
// same for every layout. Fast mode: this rank's sums left to right, then a library all-reduce.
// Collective over `comm`.
double reduce_loss_sums(Communicator& comm, bool deterministic, const std::vector<double>& micro_batch_loss_sums);

}  // namespace shardtrain
