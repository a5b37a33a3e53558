#include "shardtrain/backend/peak.hpp"

#include "shardtrain/base/stopwatch.hpp"

#include <algorithm>
#include <array>
#include <chrono>

namespace shardtrain {

namespace {
std::size_t default_size(const Backend& backend, std::size_t n) {
  return n != 0 ? n : backend.device() == DeviceKind::kCuda ? 8192 : 1024;
}
}  // namespace

MatmulPeakProbe::MatmulPeakProbe(Backend& backend, std::size_t n)
    : backend_(backend),
      n_(default_size(backend, n)),
      a_(backend, n_ * n_),
      w_(backend, n_ * n_),
      out_(backend, n_ * n_) {
  backend_.fill(a_.data(), a_.size(), 0.5f);
  backend_.fill(w_.data(), w_.size(), 0.25f);
  for (int i = 0; i < 2; ++i) backend_.matmul_forward(out_.data(), a_.data(), w_.data(), nullptr, n_, n_, n_);  // warm-up
  backend_.synchronize();
}

double MatmulPeakProbe::run(int repeats) {
  const Stopwatch watch;
  for (int i = 0; i < repeats; ++i) backend_.matmul_forward(out_.data(), a_.data(), w_.data(), nullptr, n_, n_, n_);
  backend_.synchronize();
  return watch.seconds();
}

double measure_matmul_peak_flops(Backend& backend, int repeats, std::size_t n) {
  MatmulPeakProbe probe(backend, n);
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) best = std::min(best, probe.run(1));
  return probe.flops_per_product() / best;
}

namespace {

// One datasheet row: the product name must contain `name` and none of the `unless` strings (so
// "H100" does not match "H100 PCIe"); rows are tried in order, the more specific first.
struct DatasheetRow {
  const char* name;
  const char* unless1;
  const char* unless2;
  double bf16_dense_tflops;
  double fp32_tflops;  // CUDA-core fp32 (no TF32)
};

// NVIDIA datasheets (dense figures, i.e. half the "with sparsity" ones): H100 SXM5 989.4 bf16 /
// 66.9 fp32; H100 PCIe 756 / 51.2; H100 NVL 835 / 60 (per GPU); H200 SXM 989 / 67; H200 NVL 835 /
// 60; A100 (SXM and PCIe) 312 / 19.5. (A GH200 reports a name containing "H200" or "H100" and
// takes that row.)
constexpr std::array<DatasheetRow, 6> kDatasheet{{
    {"H100 PCIe", nullptr, nullptr, 756.0, 51.2},
    {"H100 NVL", nullptr, nullptr, 835.0, 60.0},
    {"H100", "PCIe", "NVL", 989.4, 66.9},
    {"H200 NVL", nullptr, nullptr, 835.0, 60.0},
    {"H200", "NVL", nullptr, 989.0, 67.0},
    {"A100", nullptr, nullptr, 312.0, 19.5},
}};

}  // namespace

std::optional<double> datasheet_peak_flops(const std::string& device_name, Precision precision) {
  const auto has = [&](const char* s) { return s && device_name.find(s) != std::string::npos; };
  for (const DatasheetRow& row : kDatasheet) {
    if (!has(row.name) || has(row.unless1) || has(row.unless2)) continue;
    return 1e12 * (precision == Precision::kBf16 ? row.bf16_dense_tflops : row.fp32_tflops);
  }
  return std::nullopt;
}

}  // namespace shardtrain
