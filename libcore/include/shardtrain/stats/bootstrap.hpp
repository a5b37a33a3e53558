// Percentile bootstrap interval of a token-weighted mean loss, seeded and deterministic.
//
// The data are units i = 1..n, each a loss sum s_i (nats) over t_i > 0 tokens (a hold-out
// sequence, or the part of one that falls in a slice): tokens of one sequence are correlated, so
// the unit of resampling is the sequence, not the token. The statistic is the ratio
// sum(s) / sum(t). Resample r (r = 0..R-1) draws n units with replacement; draw j of resample r
// takes unit  floor(u * n / 2^64)  with  u = mix64(seed + (r * n + j + 1) * 0x9e3779b97f4a7c15)
// (base/hash.hpp's splitmix64 finaliser, 64-bit wrap-around, the product in 128 bits), so the
// draws are a pure function of (seed, r, j) and a NumPy script can replay them
// (testdata/generators/release_metrics_reference.py). The interval is the (1-level)/2 and (1+level)/2
// percentiles of the R statistics, linearly interpolated between order statistics exactly as
// numpy.percentile's default ("linear": position q in the sorted values).
#pragma once
#include <cstdint>
#include <vector>

namespace shardtrain {

struct BootstrapInterval {
  double estimate = 0;  // sum(s) / sum(t) over all units
  double lower = 0, upper = 0;
};

// The R resample statistics sum(s*)/sum(t*) in resample order (r = 0..R-1), by the draws above: what
// the interval is taken from, and what a caller needing more than two percentiles (the release
// utility's probability of regret) counts in. Throws UsageError as bootstrap_ratio_interval does.
std::vector<double> bootstrap_ratio_statistics(const std::vector<double>& loss_sums, const std::vector<double>& tokens,
                                               int resamples, std::uint64_t seed);

// Throws UsageError when the inputs differ in length, are empty, R < 2 or level is not in (0, 1).
BootstrapInterval bootstrap_ratio_interval(const std::vector<double>& loss_sums, const std::vector<double>& tokens,
                                           int resamples, std::uint64_t seed, double level = 0.95);

// The percentile rule above on already-sorted values (q in [0, 1]).
double interpolated_percentile(const std::vector<double>& sorted, double q);

}  // namespace shardtrain
