// Backend selection for builds without the CUDA backend; the CUDA build defines these in
// src/cuda/cuda_backend.cu instead.
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain {
#ifndef SHARDTRAIN_HAVE_CUDA
bool cuda_backend_available() { return false; }

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw UsageError(
      "the CUDA backend is not in this build (CPU-only: no nvcc at configure time, or "
      "-DSHARDTRAIN_CUDA=OFF); rebuild with the CUDA toolkit or use --device cpu");
}
#endif
}  // namespace shardtrain
