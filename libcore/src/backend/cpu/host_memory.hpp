// The CPU backend's host memory (private to the backend): 64-byte aligned and zeroed, as
// Backend::allocate_bytes promises, with large blocks taken from the kernel and kept for reuse.
//
// Why large blocks are handled apart. On the machines this project runs on (virtual machines
// included), the first touch of fresh memory costs far more than writing it again: the kernel
// zeroes every page on its fault (measured here: 0.6 GB/s for a first memset of 2 GB against
// 8 GB/s for the second). The trainers allocate a model's whole state at set-up (3.5 GB per rank
// at GPT-2 small), and ZeRO-3 allocates and frees its gathered units every step (GPT-2's
// embedding unit alone is 154 MB). So, for blocks of kLargeBlock bytes or more:
//   * a fresh block is mapped from the kernel (mmap, 2 MiB aligned, MADV_HUGEPAGE before first
//     touch: a training step's loops and products spend less in TLB misses on huge pages) and
//     not written here: its pages are the kernel's zero pages until first used, so memory is paid
//     for where it is first used instead of all at start-up;
//   * a released block is kept and handed to the next request of the same rounded size, zeroed
//     then (already resident: a memset at memory bandwidth), so a buffer freed and allocated
//     again every step does not fault in again every step. At most kMaxCachedBytes are kept; a
//     release beyond that returns the block to the kernel. cached_bytes() says how much is kept
//     (resident, but no tensor's).
// Smaller blocks come from the C allocator (aligned_alloc) and are zeroed with memset.
// Thread-safe: buffers may be released from the checkpoint writer's or the communicator's threads.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace shardtrain {

class HostMemory {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kLargeBlock = std::size_t(2) << 20;      // 2 MiB: one huge page
  static constexpr std::size_t kMaxCachedBytes = std::size_t(1) << 30;  // 1 GiB of released blocks kept

  HostMemory() = default;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory();  // returns every block it holds to the kernel

  // `bytes` zeroed bytes (bytes > 0); throws Error (exit 1) naming `what` when memory runs out.
  void* allocate(std::size_t bytes, const char* what);
  // A block from allocate(); null is ignored.
  void release(void* block);
  // Released large blocks kept for reuse, in bytes.
  std::size_t cached_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<void*, std::size_t> large_;  // every large block handed out: its mapped size
  std::multimap<std::size_t, void*> cached_;      // released large blocks by mapped size
  std::size_t cached_bytes_ = 0;
};

// A grow-only scratch area of floats reused across calls, in a HostMemory (the kernels' working
// space: contents are not kept when it grows).
class HostScratch {
 public:
  explicit HostScratch(HostMemory& memory) : memory_(memory) {}
  ~HostScratch() { memory_.release(data_); }
  HostScratch(const HostScratch&) = delete;
  HostScratch& operator=(const HostScratch&) = delete;
  float* get(std::size_t count) {
    if (count > capacity_) {
      memory_.release(data_);
      data_ = nullptr;  // stays valid for the destructor if the allocation below throws
      capacity_ = 0;
      data_ = static_cast<float*>(memory_.allocate(count * sizeof(float), "kernel scratch"));
      capacity_ = count;
    }
    return data_;
  }

 private:
  HostMemory& memory_;
  float* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace shardtrain
