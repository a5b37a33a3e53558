// Backend selection for builds without the CUDA backend; the CUDA build defines these in
// src/cuda/cuda_backend.cu instead.
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain {

// The vocabulary-slice ops of tensor parallelism: a backend that does not override them refuses.
namespace {
[[noreturn]] void no_tensor_parallel_op(const Backend& backend, const char* op) {
  throw UsageError(std::string(op) + ": tensor parallelism is not implemented on " + backend.describe() +
                   "; use --tp 1 on this device or --device cpu");
}
}  // namespace

void Backend::embedding_forward_slice(float*, const int32_t*, const float*, const float*, std::size_t, std::size_t,
                                      std::size_t, std::size_t, std::size_t) {
  no_tensor_parallel_op(*this, "embedding_forward_slice");
}
void Backend::embedding_backward_slice(float*, float*, const float*, const int32_t*, std::size_t, std::size_t,
                                       std::size_t, std::size_t, std::size_t) {
  no_tensor_parallel_op(*this, "embedding_backward_slice");
}
void Backend::crossentropy_slice_max(float*, const float*, std::size_t, std::size_t, std::size_t) {
  no_tensor_parallel_op(*this, "crossentropy_slice_max");
}
void Backend::crossentropy_slice_exp(float*, float*, const float*, const int32_t*, std::size_t, std::size_t,
                                     std::size_t, std::size_t) {
  no_tensor_parallel_op(*this, "crossentropy_slice_exp");
}
void Backend::crossentropy_slice_backward(float*, const float*, const int32_t*, std::size_t, std::size_t,
                                          std::size_t, float) {
  no_tensor_parallel_op(*this, "crossentropy_slice_backward");
}

#ifndef SHARDTRAIN_HAVE_CUDA
bool cuda_backend_available() { return false; }

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw UsageError(
      "the CUDA backend is not in this build (CPU-only: no nvcc at configure time, or "
      "-DSHARDTRAIN_CUDA=OFF); rebuild with the CUDA toolkit or use --device cpu");
}
#endif
}  // namespace shardtrain
