#include "shardtrain/stats/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/hash.hpp"

namespace shardtrain {
namespace {
__extension__ using Wide = unsigned __int128;  // the draw's 64 x 64 -> 128-bit product
}  // namespace

double interpolated_percentile(const std::vector<double>& sorted, double q) {
  const double position = q * double(sorted.size() - 1);
  const std::size_t below = std::size_t(std::floor(position));
  const std::size_t above = std::min(sorted.size() - 1, below + 1);
  const double fraction = position - double(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

std::vector<double> bootstrap_ratio_statistics(const std::vector<double>& loss_sums, const std::vector<double>& tokens,
                                               int resamples, std::uint64_t seed) {
  if (loss_sums.size() != tokens.size() || loss_sums.empty())
    throw UsageError("bootstrap: need as many loss sums as token counts, and at least one unit");
  if (resamples < 2) throw UsageError("bootstrap: need at least 2 resamples (got " + std::to_string(resamples) + ")");
  const std::uint64_t n = loss_sums.size();
  std::vector<double> statistics(static_cast<std::size_t>(resamples));
  for (std::uint64_t r = 0; r < std::uint64_t(resamples); ++r) {
    double s = 0, t = 0;
    for (std::uint64_t j = 0; j < n; ++j) {
      const std::uint64_t u = mix64(seed + (r * n + j + 1) * 0x9e3779b97f4a7c15ULL);
      const std::size_t i = std::size_t(Wide(u) * n >> 64);
      s += loss_sums[i];
      t += tokens[i];
    }
    statistics[std::size_t(r)] = s / t;
  }
  return statistics;
}

BootstrapInterval bootstrap_ratio_interval(const std::vector<double>& loss_sums, const std::vector<double>& tokens,
                                           int resamples, std::uint64_t seed, double level) {
  if (!(level > 0 && level < 1)) throw UsageError("bootstrap: the level must be in (0, 1)");
  std::vector<double> statistics = bootstrap_ratio_statistics(loss_sums, tokens, resamples, seed);
  BootstrapInterval interval;
  interval.estimate = std::accumulate(loss_sums.begin(), loss_sums.end(), 0.0) /
                      std::accumulate(tokens.begin(), tokens.end(), 0.0);
  std::sort(statistics.begin(), statistics.end());
  interval.lower = interpolated_percentile(statistics, (1 - level) / 2);
  interval.upper = interpolated_percentile(statistics, (1 + level) / 2);
  return interval;
}

}  // namespace shardtrain
