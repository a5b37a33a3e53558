// Epoch sampler: a counter-based permutation of the sample indices keyed by (seed, epoch), and the
// elastic mapping of the global sample stream onto steps, micro-batches and data-parallel ranks.
//
// Permutation. For n samples let k be the smallest even bit count with 2^k >= n (k >= 2). A
// balanced Feistel network of kFeistelRounds rounds permutes [0, 2^k); the round function is a
// 64-bit mixer (splitmix64 finaliser) of (key, round, right half) masked to k/2 bits, and the key is
// mix(seed, epoch). Cycle walking (re-applying the network while the value is >= n) restricts it
// to a bijection of [0, n); since 2^k < 4n the expected number of walks is below 4. Nothing is
// materialised: sample_at() is O(rounds x walks) and any rank computes any position.
//
// Global sample stream. Epochs are concatenated: stream position g (counted from epoch 0, position
// 0) is position g mod n of epoch g div n, i.e. sample sample_at(g div n, g mod n). The sampler state
// (epoch, consumed) names the next stream position epoch*n + consumed, with consumed < n.
//
// Steps (contracts 1 and 2 of ARCHITECTURE.md). With micro_batch b, grad_accum A and dp_size W the
// global batch is B = b*A*W samples. The step that starts at state s takes the next B stream
// positions (continuing into the next epoch when the current one runs out mid-batch). Global
// micro-batch i (0 <= i < A*W) holds positions [i*b, (i+1)*b) of the step; data-parallel rank r
// takes global micro-batches [r*A, (r+1)*A). So the union over ranks of a step is the same global
// batch for every W with the same B, and a state saved after a step resumes on any W.
#pragma once
#include <cstdint>
#include <vector>

namespace shardtrain::data {

inline constexpr int kFeistelRounds = 6;

// Global sampler state after some number of steps: the checkpointed position in the stream.
struct SamplerState {
  uint64_t epoch = 0;
  uint64_t consumed = 0;  // samples of this epoch already used; always < num_samples
  bool operator==(const SamplerState&) const = default;
};

// Bijection of [0, num_samples) per (seed, epoch).
class EpochSampler {
 public:
  // num_samples >= 1 (UsageError otherwise).
  EpochSampler(uint64_t num_samples, uint64_t seed);

  uint64_t num_samples() const { return n_; }
  uint64_t seed() const { return seed_; }

  // The sample id at `position` (< num_samples) of epoch `epoch`.
  uint64_t sample_at(uint64_t epoch, uint64_t position) const;
  // Inverse: the position of `sample` (< num_samples) in epoch `epoch`.
  uint64_t position_of(uint64_t epoch, uint64_t sample) const;

  // Stream helpers (see header comment).
  SamplerState advance(SamplerState state, uint64_t count) const;
  uint64_t sample_at_stream(SamplerState start, uint64_t offset) const;  // sample at start + offset

 private:
  uint64_t permute(uint64_t key, uint64_t x) const;
  uint64_t unpermute(uint64_t key, uint64_t x) const;
  uint64_t key_for(uint64_t epoch) const;
  uint64_t n_, seed_;
  int half_bits_;
  uint64_t half_mask_;
};

// How a global batch splits over ranks: b x A x W.
struct BatchLayout {
  int micro_batch = 1;  // b: samples per micro-batch
  int grad_accum = 1;   // A: micro-batches per rank per step
  int dp_rank = 0;      // r
  int dp_size = 1;      // W
  uint64_t global_batch() const { return uint64_t(micro_batch) * grad_accum * dp_size; }
};

// grad_accum for a fixed global batch on dp_size ranks: global_batch / (micro_batch * dp_size).
// Throws UsageError naming the three numbers when that is not a positive integer.
int grad_accum_for(uint64_t global_batch, int micro_batch, int dp_size);

// Sample ids of rank layout.dp_rank for the step starting at `state`: grad_accum * micro_batch ids,
// micro-batch-major (its first micro-batch, then the next...).
std::vector<uint64_t> rank_step_samples(const EpochSampler& sampler, SamplerState state,
                                        const BatchLayout& layout);
// Sample ids of the whole global batch of the step starting at `state` (global micro-batch order).
std::vector<uint64_t> global_step_samples(const EpochSampler& sampler, SamplerState state,
                                          uint64_t global_batch);

}  // namespace shardtrain::data
