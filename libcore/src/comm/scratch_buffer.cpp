#include "scratch_buffer.hpp"

namespace shardtrain::comm_detail {

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
  new std::vector<unsigned char>(std::move(host_));  // leaked on purpose (see the header)
  host_ = {};
}

}  // namespace shardtrain::comm_detail
