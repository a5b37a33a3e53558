// The per-call timing of the micro-benchmarks that bound a cost per step (recorder_bench.cpp,
// metrics_bench.cpp, exact_sum_bench.cpp): the median over several rounds (7 unless said), so one
// round disturbed by the machine's other load does not move the figure.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace shardtrain::bench {

// Median over `rounds` rounds of the nanoseconds per call of `body(i)`, `n` calls a round.
template <typename F>
double median_ns_per_call(int n, F body, int rounds_count = 7) {
  std::vector<double> rounds;
  for (int round = 0; round < rounds_count; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) body(i);
    rounds.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace shardtrain::bench
