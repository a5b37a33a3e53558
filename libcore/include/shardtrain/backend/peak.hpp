// The matrix-product peaks of a backend, the denominators of MFU (model FLOPs utilisation =
// achieved training FLOP/s / a peak): the peak measured on the backend at start, and the
// datasheet's dense peak of the device where it is known.
#pragma once
#include <optional>
#include <string>

#include "shardtrain/backend/backend.hpp"

namespace shardtrain {

// FLOP/s of the backend's matmul_forward on an n x n x n product (n = 0: the backend's default,
// 1024 on the CPU (about 0.15 s on one core; the best of ten is stable to ~2% here), 8192 on CUDA,
// where a 1024 product is too short to leave the launch overhead behind): the best of `repeats`
// timed runs after two warm-ups. It measures the backend's own product in the backend's precision,
// so on CUDA in bf16 it includes the on-the-fly rounding of both fp32 operands to bf16, which every
// training matmul pays too (about 5% of an 8192 product's time on an H100-class device).
double measure_matmul_peak_flops(Backend& backend, int repeats = 10, std::size_t n = 0);

// The same product, split so that a caller can line up several ranks before the timed part (the
// trainers measure every rank at once: ranks that share cores must be measured sharing them, or
// each sees the cores the others leave idle and the peak, the MFU denominator, is too high).
// Construction allocates the three n x n matrices and runs the two warm-ups; run(repeats) times
// `repeats` back-to-back products, synchronised at the end, and returns the seconds they took (a
// sustained rate, not the best single product: the other ranks' products overlap all of them).
class MatmulPeakProbe {
 public:
  explicit MatmulPeakProbe(Backend& backend, std::size_t n = 0);
  double run(int repeats);
  double flops_per_product() const { return 2.0 * double(n_) * double(n_) * double(n_); }

 private:
  Backend& backend_;
  std::size_t n_;
  DeviceArray<float> a_, w_, out_;
};

// The vendor's datasheet dense (no sparsity) peak in FLOP/s of `device_name` (Backend::device_name,
// as the driver reports it, e.g. "NVIDIA H200") for matrix products in `precision`, or nothing when
// the device is not in the table (every CPU, and GPUs not listed). The table (peak.cpp) holds the
// SXM and PCIe/NVL forms of the H100 and H200 and the A100; bf16 and, without tensor-float-32
// (CUBLAS_PEDANTIC_MATH), plain fp32 on the CUDA cores.
std::optional<double> datasheet_peak_flops(const std::string& device_name, Precision precision);

}  // namespace shardtrain
