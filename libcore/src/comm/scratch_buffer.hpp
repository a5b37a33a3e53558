// Grow-only scratch space of the comm thread, in host memory or on a transport's device: the
// halving/doubling algorithms' receive space (algorithms.hpp) and the staging copies
// (staging.hpp). Used on the communication thread only.
#pragma once
#include <cstddef>
#include <vector>

#include "shardtrain/backend/device_memory.hpp"

namespace shardtrain::comm_detail {

class ScratchBuffer {
 public:
  // `device`: where the space lives (a transport's device_memory()); null: host memory.
  explicit ScratchBuffer(DeviceMemory* device = nullptr) : device_(device) {}
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  // At least `bytes` of space; contents are not kept when it grows.
  void* get(std::size_t bytes);
  // The operation using it was given up and a library may still write into it: the space is
  // kept for the process's life on purpose (never freed or reused; one buffer per failed
  // communicator at most; host buffers stay reachable from a process-wide list, so a leak checker
  // does not report them) and the next get() allocates anew.
  void abandon();
  // Bytes it holds now (grow-only between abandons: the largest get() so far).
  std::size_t bytes() const { return device_ ? device_bytes_ : host_.size(); }

 private:
  DeviceMemory* device_;
  std::vector<unsigned char> host_;
  void* device_ptr_ = nullptr;
  std::size_t device_bytes_ = 0;
};

}  // namespace shardtrain::comm_detail
