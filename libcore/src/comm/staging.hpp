// The engine's staging of one operation's buffers between host and device memory (communicator.hpp,
// "Device buffers"; transport.hpp, "Where buffers live"). Used on the communication thread only.
#pragma once
#include <cstddef>
#include <vector>

#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "scratch_buffer.hpp"

namespace shardtrain::comm_detail {

class Staging {
 public:
  // `callers`: the device callers' buffers may live on (CommOptions::device_memory; null: host
  // only); `transport`: the transport's device (Transport::device_memory; null: a host transport).
  Staging(DeviceMemory* callers, DeviceMemory* transport);
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // `r` with each buffer on the wrong side replaced by a staged copy where the transport takes it
  // (inputs copied in); `r` itself when nothing needs staging. `group_size` sizes reduce-scatter
  // inputs and all-gather outputs.
  Communicator::Request stage(const Communicator::Request& r, int group_size);
  // After the staged operation completed: copies its outputs back to the caller's buffers.
  void unstage();
  // The operation was given up: the transport may still write the staged buffers, so they are never
  // freed or reused.
  void abandon();

  // Operations that needed a staging copy so far (for tests and accounting).
  std::size_t staged_operations() const { return staged_operations_; }
  // Bytes of staging space held on the transport's side.
  std::size_t scratch_bytes() const { return send_region_.bytes() + recv_region_.bytes(); }

 private:
  bool on_device(const void* ptr) const;
  void copy_in(void* staged, const void* caller, std::size_t bytes);
  void copy_out(void* caller, const void* staged, std::size_t bytes);

  DeviceMemory* callers_;
  DeviceMemory* transport_;
  ScratchBuffer send_region_, recv_region_;  // grow-only staging space on the transport's side
  // The pending copy back (recv side), set by stage(), done by unstage().
  void* back_to_ = nullptr;
  const void* back_from_ = nullptr;
  std::size_t back_bytes_ = 0;
  std::size_t staged_operations_ = 0;
};

}  // namespace shardtrain::comm_detail
