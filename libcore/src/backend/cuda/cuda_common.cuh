// Shared pieces of the CUDA backend: the error type, return-code checks, launch geometry.
//
// Every CUDA runtime and cuBLAS call in src/cuda/ goes through ST_CUDA_CHECK / ST_CUBLAS_CHECK,
// and every kernel launch is followed by ST_CUDA_CHECK_LAUNCH, so a failure becomes a
// shardtrain::Error naming the call (or kernel), the error name and string, and the source line.
// Kernel faults (illegal address, ...) are asynchronous: they surface at a later CUDA call, whose
// message then says so; CUDA_LAUNCH_BLOCKING=1 makes them surface at the faulting launch.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "shardtrain/base/error.hpp"

namespace shardtrain::cuda_impl {

// A CUDA runtime or cuBLAS failure that is not the user's to fix (launch failure, illegal
// address, lost device, driver mismatch). Out-of-memory is a UsageError instead (a smaller
// micro-batch or more ranks fixes it).
class CudaError : public Error {
 public:
  explicit CudaError(const std::string& what) : Error(ExitCode::kInternal, what) {}
};

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) throw_cuda_error(status, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

// "cudaMalloc failed: cudaErrorMemoryAllocation (out of memory) [cuda_backend.cu:123]"
std::string describe_cuda_error(cudaError_t status, const char* call, const char* file, int line);

}  // namespace shardtrain::cuda_impl

#define ST_CUDA_CHECK(call) ::shardtrain::cuda_impl::check_cuda((call), #call, __FILE__, __LINE__)
#define ST_CUBLAS_CHECK(call) \
  ::shardtrain::cuda_impl::check_cublas((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: catches bad launch configurations at once (and earlier sticky faults).
#define ST_CUDA_CHECK_LAUNCH(kernel_name) \
  ::shardtrain::cuda_impl::check_cuda(cudaGetLastError(), "launch of " kernel_name, __FILE__, __LINE__)
