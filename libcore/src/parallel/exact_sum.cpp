#include "shardtrain/parallel/exact_sum.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

constexpr std::int32_t kEmpty = INT32_MAX;      // grid_lo_ of a chunk without contributions
constexpr std::int32_t kNonFinite = INT32_MAX;  // grid_hi_ once a non-finite value was seen

// Largest |x| of values[0..n) as its fp32 bit pattern without the sign: for finite values the
// unsigned order of these patterns is the order of magnitudes, Inf is 0x7f800000 and NaN above,
// and an integer max vectorises and does not depend on order.
std::uint32_t max_magnitude_bits(const float* values, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b;
    std::memcpy(&b, values + i, sizeof b);
    m = std::max(m, b & 0x7fffffffu);
  }
  return m;
}

// e with 2^e <= |x| < 2^(e+1), from a nonzero finite magnitude's bits.
int exponent_of(std::uint32_t bits) {
  if (bits >= 0x00800000u) return int(bits >> 23) - 127;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return std::ilogb(x);  // subnormal
}

// words[i] = words[i] << s (mod 2^64; 0 for s >= 64).
void shift_left(std::uint64_t* words, std::size_t n, int s) {
  if (s == 0) return;
  if (s >= 64) {
    std::fill(words, words + n, 0);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) words[i] <<= s;
}

// words[i] = (words[i] << word_shift) + (round(values[i] * scale) << value_shift), mod 2^64 (a shift
// of 64 or more gives 0), with |values[i] * scale| <= 2^kBits. Adding and removing 1.5 x 2^52
// rounds a double of magnitude below 2^51 to the nearest integer (ties to even, the default
// rounding mode; this project never builds with -ffast-math) in a form the compiler vectorises.
// The rounding happens on the contribution's own grid, before any shift, so it depends on the
// value and its micro-batch only.
void add_scaled(std::uint64_t* words, const float* values, std::size_t n, double scale, int word_shift,
                int value_shift) {
  constexpr double kRound = 6755399441055744.0;  // 1.5 x 2^52
  if (word_shift >= 64) std::fill(words, words + n, 0), word_shift = 0;
  if (value_shift >= 64) return;  // the contribution is 0 mod 2^64 on this grid
  for (std::size_t i = 0; i < n; ++i) {
    const double r = (double(values[i]) * scale + kRound) - kRound;
    words[i] = (words[i] << word_shift) + (std::uint64_t(std::int64_t(r)) << value_shift);
  }
}

int ceil_log2(std::int64_t n) {
  int b = 0;
  while ((std::int64_t(1) << b) < n) ++b;
  return b;
}

}  // namespace

ExactSum::ExactSum(const std::vector<std::size_t>& segments) {
  chunk_first_.push_back(0);
  for (std::size_t len : segments) {
    for (std::size_t done = 0; done < len; done += kChunk) chunk_first_.push_back(n_ + std::min(len, done + kChunk));
    n_ += len;
  }
  words_.assign(n_, 0);
  grid_lo_.assign(chunk_first_.size() - 1, kEmpty);
  grid_hi_.assign(chunk_first_.size() - 1, -kEmpty);
}

void ExactSum::clear() {
  std::fill(words_.begin(), words_.end(), 0);
  std::fill(grid_lo_.begin(), grid_lo_.end(), kEmpty);
  std::fill(grid_hi_.begin(), grid_hi_.end(), -kEmpty);
}

void ExactSum::add(const float* values) {
  for (std::size_t c = 0; c < grid_lo_.size(); ++c) {
    const std::size_t first = chunk_first_[c], len = chunk_first_[c + 1] - first;
    const std::uint32_t m = max_magnitude_bits(values + first, len);
    if (m == 0) continue;  // all zero: contributes nothing
    if (m >= 0x7f800000u) {
      grid_hi_[c] = kNonFinite;
      continue;
    }
    const int k = exponent_of(m) + 1 - kBits;  // this contribution's grid: |value| / 2^k < 2^kBits
    const double scale = std::ldexp(1.0, -k);  // exact power of two, a normal double for every fp32 k
    std::uint64_t* w = words_.data() + first;
    if (grid_lo_[c] == kEmpty) {
      add_scaled(w, values + first, len, scale, 64, 0);
      grid_lo_[c] = k;
    } else if (k >= grid_lo_[c]) {  // coarser than the words: its integers move onto their grid
      add_scaled(w, values + first, len, scale, 0, k - grid_lo_[c]);
    } else {  // finer: the words move onto its grid
      add_scaled(w, values + first, len, scale, grid_lo_[c] - k, 0);
      grid_lo_[c] = k;
    }
    if (grid_hi_[c] != kNonFinite) grid_hi_[c] = std::max(grid_hi_[c], k);
  }
}

void ExactSum::agree(Communicator& comm, std::int64_t micro_batches, const std::string& what) {
  const std::size_t C = grid_lo_.size();
  const int W = comm.size();
  std::vector<std::int32_t> mine(2 * C), all;
  for (std::size_t c = 0; c < C; ++c) {
    mine[2 * c] = grid_lo_[c];
    mine[2 * c + 1] = grid_hi_[c];
  }
  if (W > 1) {
    all.resize(mine.size() * std::size_t(W));
    comm.all_gather(mine.data(), all.data(), mine.size());
  } else {
    all = mine;
  }
  const int headroom = kSumBits - kBits - ceil_log2(std::max<std::int64_t>(micro_batches, 1));
  for (std::size_t c = 0; c < C; ++c) {
    std::int32_t lo = kEmpty, hi = -kEmpty;
    for (int r = 0; r < W; ++r) {
      lo = std::min(lo, all[std::size_t(r) * 2 * C + 2 * c]);
      hi = std::max(hi, all[std::size_t(r) * 2 * C + 2 * c + 1]);
    }
    if (lo != kEmpty && hi != kNonFinite && hi - lo > headroom) {
      throw NumericalError("deterministic gradient sum: elements [" + std::to_string(chunk_first_[c]) + ", " +
                           std::to_string(chunk_first_[c + 1]) + ") of " + what +
                           ": the largest magnitude differs by 2^" + std::to_string(hi - lo) +
                           " between micro-batches, beyond the 2^" + std::to_string(headroom) +
                           " the exact 64-bit sum holds for " + std::to_string(micro_batches) +
                           " micro-batches; lower --lr, check the data, or train without --deterministic");
    }
    if (grid_lo_[c] != kEmpty && lo != kEmpty)
      shift_left(words_.data() + chunk_first_[c], chunk_first_[c + 1] - chunk_first_[c], grid_lo_[c] - lo);
    grid_lo_[c] = lo;
    grid_hi_[c] = hi;
  }
}

void ExactSum::decode(const std::uint64_t* summed, std::size_t first, std::size_t count, float* out) const {
  std::size_t c = std::size_t(std::upper_bound(chunk_first_.begin(), chunk_first_.end(), first) - chunk_first_.begin()) - 1;
  if (count > 0 && (c + 1 >= chunk_first_.size() || chunk_first_[c] != first || first + count > n_))
    throw Error(ExitCode::kInternal, "ExactSum::decode: elements [" + std::to_string(first) + ", " +
                                         std::to_string(first + count) + ") do not start at a chunk of " +
                                         std::to_string(n_) + " elements");
  for (; c + 1 < chunk_first_.size() && chunk_first_[c] < first + count; ++c) {
    const std::size_t lo = chunk_first_[c] - first, len = std::min(chunk_first_[c + 1], first + count) - chunk_first_[c];
    float* o = out + lo;
    const std::uint64_t* s = summed + lo;
    if (grid_hi_[c] == kNonFinite) {
      std::fill(o, o + len, std::numeric_limits<float>::quiet_NaN());
    } else if (grid_lo_[c] == kEmpty) {
      std::fill(o, o + len, 0.0f);
    } else {
      const double scale = std::ldexp(1.0, grid_lo_[c]);  // exact; (double)int x scale rounds once, to 53 bits
      for (std::size_t i = 0; i < len; ++i) o[i] = float(double(std::int64_t(s[i])) * scale);
    }
  }
}

void exact_all_reduce(Communicator& comm, ExactSum& sum, std::int64_t micro_batches, const std::string& what, float* out) {
  sum.agree(comm, micro_batches, what);
  if (comm.size() > 1) comm.all_reduce(sum.words(), sum.size());
  sum.decode(sum.words(), 0, sum.size(), out);
}

double reduce_loss_sums(Communicator& comm, bool deterministic, const std::vector<double>& micro_batch_loss_sums) {
  double local = 0.0;
  if (!deterministic || comm.size() == 1) {
    for (double x : micro_batch_loss_sums) local += x;
    if (comm.size() > 1) comm.all_reduce(&local, 1);
    return local;
  }
  std::vector<double> all(micro_batch_loss_sums.size() * std::size_t(comm.size()));
  comm.all_gather(micro_batch_loss_sums.data(), all.data(), micro_batch_loss_sums.size());
  double total = 0.0;
  for (double x : all) total += x;  // global micro-batch order
  return total;
}

}  // namespace shardtrain
