#include "scratch_buffer.hpp"

#include <mutex>

namespace shardtrain::comm_detail {
namespace {

// Abandoned host buffers, kept for the process's life (never freed, never reused: see the header)
// and reachable from here, so that a leak checker sees a deliberate retention, not a lost block.
struct AbandonedBuffers {
  std::mutex mu;
  std::vector<std::vector<unsigned char>> kept;
};
AbandonedBuffers& abandoned_buffers() {
  static auto* buffers = new AbandonedBuffers();  // never destroyed: a transport may still write after exit starts
  return *buffers;
}

}  // namespace

ScratchBuffer::~ScratchBuffer() {
  if (device_ptr_) device_->release(device_ptr_);
}

void* ScratchBuffer::get(std::size_t bytes) {
  if (!device_) {
    if (host_.size() < bytes) host_.resize(bytes);
    return host_.data();
  }
  if (device_bytes_ < bytes) {
    if (device_ptr_) device_->release(device_ptr_);
    device_ptr_ = nullptr;  // not left dangling if the allocation throws
    device_bytes_ = 0;
    device_ptr_ = device_->allocate(bytes);
    device_bytes_ = bytes;
  }
  return device_ptr_;
}

void ScratchBuffer::abandon() {
  device_ptr_ = nullptr;
  device_bytes_ = 0;
  if (host_.empty()) return;
  AbandonedBuffers& abandoned = abandoned_buffers();
  std::lock_guard<std::mutex> lock(abandoned.mu);
  abandoned.kept.push_back(std::move(host_));  // moving a vector keeps its storage where the library writes
  host_ = {};
}

}  // namespace shardtrain::comm_detail
