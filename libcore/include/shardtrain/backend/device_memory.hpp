// DeviceMemory: an accelerator's memory as threads other than the compute thread see it -- the comm
// engine's communication thread, which stages device buffers through host memory for a host
// transport (MPI) and host buffers through device memory for a device transport (NCCL), and runs
// the canonical all-reduce's additions on device buffers.
//
// Unlike a Backend (one in-order queue, one thread), every call here is synchronous and may be made
// from any thread: the CUDA implementation has its own stream and waits for its own work only.
// Ordering with the compute queue: the comm engine and the NCCL transport call
// wait_for_device_work() before they read a device buffer handed to them, so a buffer is safe to
// submit as soon as the kernels writing it are queued (the trainers also synchronise before they
// submit gradients; not every submission does, e.g. ZeRO's parameter all-gathers after a copy).
#pragma once
#include <cstddef>
#include <memory>

#include "shardtrain/base/dtype.hpp"

namespace shardtrain {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Short name for messages ("cuda").
  virtual const char* name() const = 0;
  // True when `ptr` points into memory of this device (an allocation of a Backend or of allocate
  // below); false for host memory, pinned or not.
  virtual bool is_device(const void* ptr) const = 0;
  // `bytes` of device memory (not zeroed); release() frees it. allocate(0) may return null.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // Blocks until all work queued on the device so far, by any thread on any stream, is complete
  // (CUDA: cudaDeviceSynchronize). Work queued later is not waited for.
  virtual void wait_for_device_work() = 0;
  // Copies, returning when the bytes have arrived.
  virtual void to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;
  virtual void to_device(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  // out[i] = a[i] + b[i] for i < n, all three device arrays of `dtype` (kFloat32 or kFloat64), in
  // IEEE round-to-nearest (one addition per element, no contraction: bitwise the host's a + b).
  // `out` may be `a` or `b`. Returns when done.
  virtual void add(void* out, const void* a, const void* b, std::size_t n, DType dtype) = 0;
};

// The CUDA device `device_index`'s memory. Throws UsageError in a build without the CUDA backend or
// where the device is not visible.
std::shared_ptr<DeviceMemory> make_cuda_device_memory(int device_index);

}  // namespace shardtrain
