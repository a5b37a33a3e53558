// Backend-independent pieces of backend.hpp (precision names), and the backend selection for builds
// without the CUDA backend; the CUDA build defines those in cuda/cuda_backend.cu instead.
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain {

const char* precision_name(Precision p) { return p == Precision::kBf16 ? "bf16" : "fp32"; }

Precision parse_precision(const std::string& text, const char* option) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  throw UsageError(std::string(option) + " must be bf16 or fp32 (got '" + text + "')");
}

#ifndef SHARDTRAIN_HAVE_CUDA
bool cuda_backend_available() { return false; }
int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(int, Precision) {
  throw UsageError(
      "the CUDA backend is not in this build (CPU-only: no nvcc at configure time, or "
      "-DSHARDTRAIN_CUDA=OFF); rebuild with the CUDA toolkit or use --device cpu");
}

std::shared_ptr<DeviceMemory> make_cuda_device_memory(int) {
  throw UsageError("CUDA device memory is not in this build (CPU-only); use --device cpu");
}
#endif
}  // namespace shardtrain
