#include "host_memory.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

[[noreturn]] void out_of_memory(std::size_t bytes, const char* what) {
  throw Error(ExitCode::kFailure, "out of host memory allocating " + std::to_string(bytes) + " bytes of " + what);
}

// `size` bytes (a multiple of kLargeBlock) at a kLargeBlock-aligned address: one mapping of
// size + kLargeBlock, trimmed at both ends, so that its huge pages line up.
void* map_aligned(std::size_t size) {
  const std::size_t span = size + HostMemory::kLargeBlock;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + HostMemory::kLargeBlock - 1) & ~std::uintptr_t(HostMemory::kLargeBlock - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::uintptr_t end = start + span, used_end = aligned + size;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  void* block = reinterpret_cast<void*>(aligned);
  (void)::madvise(block, size, MADV_HUGEPAGE);  // best effort: where huge pages are off, ordinary pages
  return block;
}

}  // namespace

HostMemory::~HostMemory() {
  for (const auto& [block, size] : large_) ::munmap(block, size);
}

void* HostMemory::allocate(std::size_t bytes, const char* what) {
  if (bytes < kLargeBlock) {
    const std::size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (!p) out_of_memory(bytes, what);
    std::memset(p, 0, bytes);
    return p;
  }
  const std::size_t size = (bytes + kLargeBlock - 1) / kLargeBlock * kLargeBlock;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto reuse = cached_.find(size);
    if (reuse != cached_.end()) {
      void* block = reuse->second;
      cached_.erase(reuse);
      cached_bytes_ -= size;
      std::memset(block, 0, size);  // resident already: bandwidth, not page faults
      return block;
    }
  }
  void* block = map_aligned(size);
  if (!block) out_of_memory(bytes, what);
  std::lock_guard<std::mutex> lock(mutex_);
  large_.emplace(block, size);
  return block;
}

void HostMemory::release(void* block) {
  if (!block) return;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto it = large_.find(block);
  if (it == large_.end()) {
    lock.unlock();
    std::free(block);
    return;
  }
  const std::size_t size = it->second;
  if (cached_bytes_ + size <= kMaxCachedBytes) {
    cached_.emplace(size, block);
    cached_bytes_ += size;
    return;
  }
  large_.erase(it);
  lock.unlock();
  ::munmap(block, size);
}

std::size_t HostMemory::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

}  // namespace shardtrain
