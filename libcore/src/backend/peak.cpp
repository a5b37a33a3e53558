#include "shardtrain/backend/peak.hpp"

#include "shardtrain/base/stopwatch.hpp"

#include <algorithm>
#include <chrono>

namespace shardtrain {

double measure_matmul_peak_flops(Backend& backend, int repeats) {
  constexpr std::size_t n = 1024;
  DeviceArray<float> a(backend, n * n), w(backend, n * n), out(backend, n * n);
  backend.fill(a.data(), a.size(), 0.5f);
  backend.fill(w.data(), w.size(), 0.25f);
  for (int i = 0; i < 2; ++i) backend.matmul_forward(out.data(), a.data(), w.data(), nullptr, n, n, n);  // warm-up
  backend.synchronize();
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const Stopwatch watch;
    backend.matmul_forward(out.data(), a.data(), w.data(), nullptr, n, n, n);
    backend.synchronize();
    best = std::min(best, watch.seconds());
  }
  return 2.0 * n * n * n / best;
}

}  // namespace shardtrain
