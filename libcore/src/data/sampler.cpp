// Feistel-network permutation with cycle walking, and the elastic step/rank mapping (sampler.hpp).
#include "shardtrain/data/sampler.hpp"

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"

namespace shardtrain::data {

namespace {
inline uint64_t round_function(uint64_t key, int round, uint64_t right) {
  return mix64(mix64(key + 0x9e3779b97f4a7c15ULL * uint64_t(round + 1)) ^ right);
}
}  // namespace

EpochSampler::EpochSampler(uint64_t num_samples, uint64_t seed) : n_(num_samples), seed_(seed) {
  if (num_samples == 0) throw UsageError("the sampler needs at least one sample (the selection has none)");
  int bits = 2;
  while (bits < 64 && (uint64_t(1) << bits) < num_samples) bits += 2;
  half_bits_ = bits / 2;
  half_mask_ = half_bits_ == 32 ? 0xffffffffULL : ((uint64_t(1) << half_bits_) - 1);
}

uint64_t EpochSampler::key_for(uint64_t epoch) const {
  return mix64(mix64(seed_ ^ 0x5348415244545241ULL) ^ (epoch * 0xd1b54a32d192ed03ULL + 1));
}

uint64_t EpochSampler::permute(uint64_t key, uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int r = 0; r < kFeistelRounds; ++r) {
    uint64_t next = left ^ (round_function(key, r, right) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t EpochSampler::unpermute(uint64_t key, uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int r = kFeistelRounds - 1; r >= 0; --r) {
    uint64_t prev = right ^ (round_function(key, r, left) & half_mask_);
    right = left;
    left = prev;
  }
  return (left << half_bits_) | right;
}

uint64_t EpochSampler::sample_at(uint64_t epoch, uint64_t position) const {
  if (position >= n_)
    throw UsageError("sampler position " + std::to_string(position) + " is out of range (" +
                     std::to_string(n_) + " samples)");
  const uint64_t key = key_for(epoch);
  uint64_t x = position;
  do x = permute(key, x); while (x >= n_);  // cycle walking
  return x;
}

uint64_t EpochSampler::position_of(uint64_t epoch, uint64_t sample) const {
  if (sample >= n_)
    throw UsageError("sample " + std::to_string(sample) + " is out of range (" + std::to_string(n_) +
                     " samples)");
  const uint64_t key = key_for(epoch);
  uint64_t x = sample;
  do x = unpermute(key, x); while (x >= n_);
  return x;
}

SamplerState EpochSampler::advance(SamplerState s, uint64_t count) const {
  if (s.consumed >= n_)
    throw UsageError("sampler state consumed=" + std::to_string(s.consumed) + " is not below the " +
                     std::to_string(n_) + " samples of an epoch (was the checkpoint made on other data?)");
  uint64_t total = s.consumed + count;  // no overflow for any realistic run (< 2^63 samples)
  return {s.epoch + total / n_, total % n_};
}

uint64_t EpochSampler::sample_at_stream(SamplerState start, uint64_t offset) const {
  SamplerState p = advance(start, offset);
  return sample_at(p.epoch, p.consumed);
}

int grad_accum_for(uint64_t global_batch, int micro_batch, int dp_size) {
  if (micro_batch < 1 || dp_size < 1 || global_batch == 0 ||
      global_batch % (uint64_t(micro_batch) * uint64_t(dp_size)) != 0)
    throw UsageError("global batch " + std::to_string(global_batch) + " is not micro_batch " +
                     std::to_string(micro_batch) + " x dp_size " + std::to_string(dp_size) +
                     " x a whole grad_accum");
  return int(global_batch / (uint64_t(micro_batch) * uint64_t(dp_size)));
}

std::vector<uint64_t> rank_step_samples(const EpochSampler& sampler, SamplerState state,
                                        const BatchLayout& layout) {
  if (layout.micro_batch < 1 || layout.grad_accum < 1 || layout.dp_size < 1 || layout.dp_rank < 0 ||
      layout.dp_rank >= layout.dp_size)
    throw UsageError("invalid batch layout: micro_batch " + std::to_string(layout.micro_batch) +
                     ", grad_accum " + std::to_string(layout.grad_accum) + ", dp_rank " +
                     std::to_string(layout.dp_rank) + " of dp_size " + std::to_string(layout.dp_size));
  const uint64_t b = uint64_t(layout.micro_batch), A = uint64_t(layout.grad_accum);
  const uint64_t first = uint64_t(layout.dp_rank) * A * b;  // position of its first sample in the step
  std::vector<uint64_t> out(A * b);
  SamplerState p = sampler.advance(state, first);
  for (uint64_t k = 0; k < A * b; ++k) {
    out[k] = sampler.sample_at(p.epoch, p.consumed);
    p = sampler.advance(p, 1);
  }
  return out;
}

std::vector<uint64_t> global_step_samples(const EpochSampler& sampler, SamplerState state,
                                          uint64_t global_batch) {
  std::vector<uint64_t> out(global_batch);
  SamplerState p = state;
  for (uint64_t k = 0; k < global_batch; ++k) {
    out[k] = sampler.sample_at(p.epoch, p.consumed);
    p = sampler.advance(p, 1);
  }
  return out;
}

}  // namespace shardtrain::data
