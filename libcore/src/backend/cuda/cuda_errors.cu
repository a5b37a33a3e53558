// The CUDA and cuBLAS error reports of cuda_common.cuh: the failed call, the device, the error's
// name and text and where in our source it came from; out-of-memory as a UsageError (a smaller
// micro-batch or more ranks fixes it), everything else as a CudaError.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "cuda_common.cuh"
#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace cuda_impl {
namespace {

// "[cuda_backend.cu:123]": the source file's name without its folders, and the line.
std::string source_location(const char* file, int line) {
  std::string where = file;
  const auto slash = where.find_last_of('/');
  if (slash != std::string::npos) where = where.substr(slash + 1);
  return "[" + where + ":" + std::to_string(line) + "]";
}

}  // namespace

std::string describe_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);  // best effort, for the message only
  return std::string(call) + " failed on CUDA device " + std::to_string(device) + ": " +
         cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ") " + source_location(file, line);
}

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  std::string message = describe_cuda_error(status, call, file, line);
  if (status == cudaErrorMemoryAllocation)
    throw UsageError(message + "; the device is out of memory: use a smaller micro-batch or "
                               "sequence length, or more ranks");
  // Sticky faults from earlier asynchronous work are reported by whichever call sees them first.
  throw CudaError(message +
                  "; if this is a kernel fault it may come from earlier queued work: rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to locate it");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  const std::string message = std::string(call) + " failed: " + cublasGetStatusName(status) + " (" +
                              cublasGetStatusString(status) + ") " + source_location(file, line);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw UsageError(message + "; the device is out of memory");
  throw CudaError(message);
}

}  // namespace cuda_impl
}  // namespace shardtrain
