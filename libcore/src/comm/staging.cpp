#include "staging.hpp"

namespace shardtrain::comm_detail {

Staging::Staging(DeviceMemory* callers, DeviceMemory* transport)
    : callers_(callers ? callers : transport), transport_(transport), send_region_(transport), recv_region_(transport) {}

bool Staging::on_device(const void* ptr) const { return callers_ && ptr && callers_->is_device(ptr); }

// caller -> transport side: device -> host for a host transport (after the device work queued so
// far, which may still be writing the buffer), host -> device for a device one.
void Staging::copy_in(void* staged, const void* caller, std::size_t bytes) {
  if (transport_) {
    transport_->to_device(staged, caller, bytes);
  } else {
    callers_->wait_for_device_work();
    callers_->to_host(staged, caller, bytes);
  }
}

void Staging::copy_out(void* caller, const void* staged, std::size_t bytes) {
  if (transport_) transport_->to_host(caller, staged, bytes);
  else callers_->to_device(caller, staged, bytes);  // the operation's own output: nothing queued writes it
}

Communicator::Request Staging::stage(const Communicator::Request& r, int group_size) {
  back_to_ = nullptr;
  if (!callers_ || r.count == 0) return r;  // no device anywhere, or nothing to move
  const bool transport_on_device = transport_ != nullptr;
  const std::size_t bytes = r.count * dtype_size(r.dtype);
  const std::size_t send_bytes = r.op == CollectiveOp::kReduceScatter ? bytes * group_size : bytes;
  const std::size_t recv_bytes = r.op == CollectiveOp::kAllGather ? bytes * group_size : bytes;
  Communicator::Request staged = r;
  bool any = false;
  const bool in_place = r.send == r.recv;
  if (r.recv && on_device(r.recv) != transport_on_device) {
    // In place (all-reduce, broadcast): the buffer is input and output; else output only.
    void* copy = recv_region_.get(recv_bytes);
    if (in_place) copy_in(copy, r.recv, recv_bytes);
    staged.recv = copy;
    if (in_place) staged.send = copy;
    back_to_ = r.recv;
    back_from_ = copy;
    back_bytes_ = recv_bytes;
    any = true;
  }
  if (!in_place && r.send && on_device(r.send) != transport_on_device) {
    void* copy = send_region_.get(send_bytes);
    copy_in(copy, r.send, send_bytes);
    staged.send = copy;
    any = true;
  }
  if (any) ++staged_operations_;
  return staged;
}

void Staging::unstage() {
  if (back_to_) copy_out(back_to_, back_from_, back_bytes_);
  back_to_ = nullptr;
}

void Staging::abandon() {
  send_region_.abandon();  // a library may still write them (see the header)
  recv_region_.abandon();
  back_to_ = nullptr;
}

}  // namespace shardtrain::comm_detail
