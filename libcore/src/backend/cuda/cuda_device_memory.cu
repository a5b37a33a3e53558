// DeviceMemory (device_memory.hpp) for CUDA: a private non-blocking stream, synchronous calls.
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "cuda_common.cuh"
#include "cuda_kernels.cuh"
#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/base/log.hpp"

namespace shardtrain {
namespace cuda_impl {
namespace {

class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(device) {
    ST_CUDA_CHECK(cudaSetDevice(device_));
    ST_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaDeviceMemory() override {
    if (cudaSetDevice(device_) == cudaSuccess && stream_) cudaStreamDestroy(stream_);
  }
  CudaDeviceMemory(const CudaDeviceMemory&) = delete;
  CudaDeviceMemory& operator=(const CudaDeviceMemory&) = delete;

  const char* name() const override { return "cuda"; }

  bool is_device(const void* ptr) const override {
    if (!ptr) return false;
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
      cudaGetLastError();  // not a pointer CUDA knows: plain host memory
      return false;
    }
    return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  }

  void* allocate(std::size_t bytes) override {
    activate();
    if (bytes == 0) return nullptr;
    void* ptr = nullptr;
    ST_CUDA_CHECK(cudaMalloc(&ptr, bytes));
    return ptr;
  }
  void release(void* ptr) override {
    if (!ptr) return;
    if (cudaSetDevice(device_) != cudaSuccess || cudaFree(ptr) != cudaSuccess)
      log_line("warning: cudaFree failed while releasing a communication staging buffer");
  }
  void wait_for_device_work() override {
    activate();
    ST_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void to_host(void* host_dst, const void* device_src, std::size_t bytes) override {
    copy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost);
  }
  void to_device(void* device_dst, const void* host_src, std::size_t bytes) override {
    copy(device_dst, host_src, bytes, cudaMemcpyHostToDevice);
  }
  void add(void* out, const void* a, const void* b, std::size_t n, DType dtype) override {
    activate();
    if (dtype == DType::kFloat64)
      launch_add(static_cast<double*>(out), static_cast<const double*>(a), static_cast<const double*>(b), n, stream_);
    else
      launch_add(static_cast<float*>(out), static_cast<const float*>(a), static_cast<const float*>(b), n, stream_);
    ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  void activate() { ST_CUDA_CHECK(cudaSetDevice(device_)); }
  void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    activate();
    if (bytes == 0) return;
    ST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    ST_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace
}  // namespace cuda_impl

std::shared_ptr<DeviceMemory> make_cuda_device_memory(int device_index) {
  const int count = cuda_device_count();
  if (device_index < 0 || device_index >= count)
    throw UsageError("CUDA device " + std::to_string(device_index) + " is not available: " + std::to_string(count) +
                     " CUDA device" + (count == 1 ? " is" : "s are") + " visible to this process; use --device cpu");
  return std::make_shared<cuda_impl::CudaDeviceMemory>(device_index);
}

}  // namespace shardtrain
