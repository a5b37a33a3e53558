// Backend-independent pieces of backend.hpp (precision names, host_floats), and the backend selection for builds
// without the CUDA backend; the CUDA build defines those in cuda/cuda_backend.cu instead.
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/capabilities.hpp"
#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain {

// The vocabulary-slice ops of tensor parallelism: a backend that does not override them refuses.
namespace {
[[noreturn]] void no_tensor_parallel_op(const Backend& backend, const char* op) {
  throw UsageError(std::string(op) + ": tensor parallelism is not implemented on " + backend.describe() +
                   "; use --tp 1 on this device or --device cpu");
}
}  // namespace

const float* Backend::host_floats(const float* device_src, std::size_t n, std::vector<float>& scratch) {
  if (device() == DeviceKind::kCpu) return device_src;
  scratch.resize(n);
  download_bytes(scratch.data(), device_src, n * sizeof(float));
  return scratch.data();
}

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

std::size_t attention_state_elements_for(DeviceKind device, std::size_t batch, std::size_t num_heads,
                                         std::size_t seq_len) {
  const std::size_t rows = batch * num_heads * seq_len;
  return backend_capabilities(device).attention_state == AttentionState::kLogSumExp ? rows : rows * seq_len;
}

const char* precision_name(Precision p) {
  for (const auto& [name, precision] : kPrecisionNames)
    if (precision == p) return name;
  return "?";
}

Precision parse_precision(const std::string& text, const char* option) {
  for (const auto& [name, precision] : kPrecisionNames)
    if (text == name) return precision;
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
