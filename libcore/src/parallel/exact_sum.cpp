#include "shardtrain/parallel/exact_sum.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

__extension__ typedef __int128 Int128;  // GCC's and Clang's 128-bit integers (__extension__: no -Wpedantic)
__extension__ typedef unsigned __int128 UInt128;

constexpr std::int32_t kEmpty = -1;              // top_ of a chunk without a nonzero value
constexpr std::int32_t kNonFinite = 1 << 20;     // top_ from here on: a NaN or Inf was seen
constexpr int kBias = 149;                       // bit i of the fixed-point form is 2^(i - 149)
constexpr double kDigit = 1099511627776.0;       // 2^40
constexpr double kInvDigit = 1.0 / 1099511627776.0;
static_assert(ExactSum::kDigitBits == 40, "kDigit is 2^kDigitBits");

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

// The digit holding the most significant bit of a nonzero finite magnitude's bits, at least 1
// (digits 0 and 1 then hold every bit of the chunk: the window needs no digit below 0).
std::int32_t top_digit(std::uint32_t bits) {
  const int msb = bits >= 0x00800000u ? int(bits >> 23) + 22  // normal: floor(log2) + 149
                                      : 31 - __builtin_clz(bits);  // subnormal: the mantissa's top bit
  return std::max(1, msb / ExactSum::kDigitBits);
}

// The code of a non-finite chunk: its first non-finite element (offset in the chunk) and kind.
std::int32_t non_finite_code(const float* values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i])) return kNonFinite + std::int32_t(2 * i) + (std::isnan(values[i]) ? 1 : 0);
  return kNonFinite;
}

// Moves element lanes [digit T, digit T - 1] up by `by` digits: truncating the kept sum to the
// coarser window is the same as truncating every value to it (digits are cut at absolute positions).
void raise_window(std::uint64_t* lanes, std::size_t n, std::int32_t by) {
  for (std::size_t i = 0; i < n; ++i) {
    lanes[2 * i + 1] = by == 1 ? lanes[2 * i] : 0;
    lanes[2 * i] = 0;
  }
}

// An integer-valued double x with |x| < 2^51, plus kMagic (1.5 x 2^52, where doubles are the
// integers), holds x in the low bits of its pattern: pattern(x + kMagic) - kMagicBits = x, exactly.
// It vectorises on any x86-64 (a double -> int64 conversion does only with AVX-512).
constexpr double kMagic = 6755399441055744.0;
constexpr std::uint64_t kMagicBits = 0x4338000000000000ull;

std::uint64_t magic_to_int(double integer_valued) {
  std::uint64_t bits;
  const double t = integer_valued + kMagic;
  std::memcpy(&bits, &t, sizeof bits);
  return bits - kMagicBits;
}

// Adds values[0..n), each truncated toward zero to a multiple of 2^B, B = 40 (top - 1) - 149, as
// its two digits: with s = |v| 2^-B (exact in double: a power-of-two scaling, s < 2^80), the high
// digit trunc(s / 2^40) and the low trunc(s - high 2^40) (exact: s has 24 significant bits), both
// below 2^40, with v's sign. trunc and the magic conversion vectorise; the digits depend on the
// value and the window only.
// `first`: the chunk's lanes hold nothing yet (not even zeros): the digits are stored, not added,
// which spares a read of 16 bytes per element (the first micro-batch of a step).
template <bool first>
void add_digits(std::uint64_t* __restrict lanes, const float* __restrict values, std::size_t n, std::int32_t top) {
  const double scale = std::ldexp(1.0, kBias - ExactSum::kDigitBits * (top - 1));
  for (std::size_t i = 0; i < n; ++i) {
    const double v = double(values[i]);
    const double s = std::fabs(v) * scale;
    const double high = std::trunc(s * kInvDigit);
    const double low = std::trunc(s - high * kDigit);
    const std::uint64_t high_digit = magic_to_int(std::copysign(high, v)), low_digit = magic_to_int(std::copysign(low, v));
    lanes[2 * i] = first ? high_digit : lanes[2 * i] + high_digit;
    lanes[2 * i + 1] = first ? low_digit : lanes[2 * i + 1] + low_digit;
  }
}

// fp32 of high x 2^(e + 40) + low x 2^e, rounded once (nearest, ties to even), exactly: the 128-bit
// integer is cut to 53 bits rounded to odd (the dropped bits OR-ed into the last one), which
// double rounding to fp32's at most 24 bits cannot get wrong.
float decode_wide(std::int64_t high, std::int64_t low, int e) {
  const Int128 q = (Int128(high) << ExactSum::kDigitBits) + low;
  if (q == 0) return 0.0f;
  const UInt128 u = q < 0 ? -UInt128(q) : UInt128(q);
  int shift = 0;
  while ((u >> shift) >= UInt128(1) << 53) ++shift;
  const bool sticky = shift > 0 && (u & ((UInt128(1) << shift) - 1)) != 0;
  const double d = std::ldexp(double(std::uint64_t(u >> shift) | (sticky ? 1u : 0u)), shift + e);
  return float(q < 0 ? -d : d);
}

// The same from doubles when both lanes are below 2^53 (the usual case: N <= 2^13): a = high
// 2^(e+40) and b = low 2^e are exact (unit = 2^e >= 2^-149, products of power-of-two scalings stay
// normal doubles), TwoSum gives s = fl(a + b) and its error, and s is moved to its odd neighbour
// toward the error when it was rounded to an even one (round to odd). No libm call per element.
float decode_lanes(std::int64_t high, std::int64_t low, int e, double unit) {
  constexpr std::int64_t kExact = std::int64_t(1) << 53;
  if (high >= kExact || high <= -kExact || low >= kExact || low <= -kExact) return decode_wide(high, low, e);
  const double a = double(high) * (unit * kDigit), b = double(low) * unit;
  double s = a + b;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);
  std::uint64_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  if (err != 0 && (bits & 1) == 0) {
    bits += (err > 0) == (s > 0) ? 1 : std::uint64_t(-1);  // away from or toward zero, to the odd neighbour
    std::memcpy(&s, &bits, sizeof s);
  }
  return float(s);  // beyond fp32's range: +-Inf (IEEE conversion)
}

}  // namespace

ExactSum::ExactSum(const std::vector<std::size_t>& segments, std::vector<std::string> names, std::size_t padded_size)
    : names_(std::move(names)) {
  if (!names_.empty() && names_.size() != segments.size())
    throw Error(ExitCode::kInternal, "ExactSum: " + std::to_string(names_.size()) + " names for " +
                                         std::to_string(segments.size()) + " segments");
  chunk_first_.push_back(0);
  for (std::size_t len : segments) {
    segment_first_.push_back(n_);
    for (std::size_t done = 0; done < len; done += kChunk) chunk_first_.push_back(n_ + std::min(len, done + kChunk));
    n_ += len;
  }
  top_.assign(chunk_first_.size() - 1, kEmpty);
  word_count_ = kLanes * std::max(n_, padded_size);
  words_.reset(new std::uint64_t[word_count_]);  // default-initialised: see words_
  std::fill(words_.get() + kLanes * n_, words_.get() + word_count_, std::uint64_t(0));
}

void ExactSum::clear() { std::fill(top_.begin(), top_.end(), kEmpty); }  // an empty chunk's lanes are not read

void ExactSum::add(const float* values) {
  for (std::size_t c = 0; c < top_.size(); ++c) {
    if (top_[c] >= kNonFinite) continue;  // refused at agree() whatever else arrives
    const std::size_t first = chunk_first_[c], len = chunk_first_[c + 1] - first;
    const std::uint32_t m = max_magnitude_bits(values + first, len);
    if (m == 0) continue;  // all zero: contributes nothing
    if (m >= 0x7f800000u) {
      top_[c] = non_finite_code(values + first, len);
      continue;
    }
    std::uint64_t* lanes = words_.get() + kLanes * first;
    const std::int32_t t = top_digit(m);
    if (top_[c] == kEmpty) {
      top_[c] = t;
      add_digits<true>(lanes, values + first, len, t);
      continue;
    }
    if (t > top_[c]) raise_window(lanes, len, t - top_[c]);
    top_[c] = std::max(top_[c], t);
    add_digits<false>(lanes, values + first, len, top_[c]);
  }
}

std::string ExactSum::element_name(std::size_t i, const std::string& what) const {
  if (names_.empty()) return "element " + std::to_string(i) + " of " + what;
  const std::size_t s = std::size_t(std::upper_bound(segment_first_.begin(), segment_first_.end(), i) - segment_first_.begin()) - 1;
  return "element " + std::to_string(i - segment_first_[s]) + " of " + names_[s] + " (" + what + ")";
}

void ExactSum::agree(Communicator& comm, std::int64_t micro_batches, const std::string& what) {
  if (micro_batches > kMaxMicroBatches)
    throw Error(ExitCode::kUsage, "deterministic gradient sum: " + std::to_string(micro_batches) +
                                      " micro-batches per step, beyond the " + std::to_string(kMaxMicroBatches) +
                                      " its 64-bit lanes add exactly; raise --micro-batch or lower --global-batch");
  const std::size_t C = top_.size();
  const int W = comm.size();
  std::vector<std::int32_t> all = top_;  // rank r's digits at [r C, (r + 1) C)
  if (W > 1) {
    all.resize(C * std::size_t(W));
    comm.all_gather(top_.data(), all.data(), C);
  }
  std::size_t non_finite_chunks = 0, first_bad = 0;
  std::int32_t first_code = 0;
  for (std::size_t c = 0; c < C; ++c) {
    std::int32_t top = kEmpty, bad = INT32_MAX;
    for (int r = W - 1; r >= 0; --r) {  // the lowest rank holding a non-finite value names it, on every rank alike
      const std::int32_t t = all[std::size_t(r) * C + c];
      if (t >= kNonFinite) bad = t;
      else top = std::max(top, t);
    }
    if (bad != INT32_MAX) {
      if (non_finite_chunks++ == 0) first_bad = c, first_code = bad;
      continue;
    }
    std::uint64_t* lanes = words_.get() + kLanes * chunk_first_[c];
    const std::size_t len = chunk_first_[c + 1] - chunk_first_[c];
    if (top_[c] == kEmpty) std::fill(lanes, lanes + kLanes * len, std::uint64_t(0));  // held nothing: zeros to sum
    else if (top > top_[c]) raise_window(lanes, len, top - top_[c]);
    top_[c] = top;
  }
  if (non_finite_chunks > 0) {
    const std::int32_t offset = (first_code - kNonFinite) / 2;
    throw NumericalError("non-finite gradient: " + element_name(chunk_first_[first_bad] + std::size_t(offset), what) +
                         " is " + ((first_code - kNonFinite) % 2 ? "NaN" : "Inf") + " in a micro-batch (" +
                         std::to_string(non_finite_chunks) + " chunk" + (non_finite_chunks == 1 ? "" : "s") + " of " +
                         std::to_string(kChunk) + " elements hold a NaN or Inf); lower --lr or check the data");
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
    const std::uint64_t* s = summed + kLanes * lo;
    if (top_[c] == kEmpty) {
      std::fill(o, o + len, 0.0f);
      continue;
    }
    const int e = kDigitBits * (top_[c] - 1) - kBias;  // the low digit's unit: 2^B
    const double unit = std::ldexp(1.0, e);
    for (std::size_t i = 0; i < len; ++i)
      o[i] = decode_lanes(std::int64_t(s[2 * i]), std::int64_t(s[2 * i + 1]), e, unit);
  }
}

void exact_all_reduce(Communicator& comm, ExactSum& sum, std::int64_t micro_batches, const std::string& what, float* out) {
  sum.agree(comm, micro_batches, what);
  if (comm.size() > 1) comm.all_reduce(sum.words(), ExactSum::kLanes * sum.size());
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
