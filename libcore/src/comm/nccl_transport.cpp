// The NCCL transport (transport.hpp) and make_nccl_communicator (nccl.hpp). Every NCCL call of the
// comm layer is in this file; MPI is used once, at creation, to hand NCCL's unique id around.
#include <cuda_runtime.h>
#include <nccl.h>

#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/comm/nccl.hpp"
#include "shardtrain/comm/transport.hpp"

namespace shardtrain {
namespace {

[[noreturn]] void nccl_failed(ncclResult_t status, const char* call, ncclComm_t comm) {
  std::string message = std::string(call) + " failed: " + ncclGetErrorString(status);
  if (comm) {
    const char* last = ncclGetLastError(comm);
    if (last && *last) message += std::string(" (") + last + ")";
  }
  throw CommunicationError(message);
}

void check_nccl(ncclResult_t status, const char* call, ncclComm_t comm) {
  if (status != ncclSuccess && status != ncclInProgress) nccl_failed(status, call, comm);
}

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw CommunicationError(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kUInt64: return ncclUint64;
    case DType::kUInt8: return ncclUint8;
  }
  throw UsageError("NCCL transport: unknown dtype");
}

class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, int device, std::shared_ptr<DeviceMemory> memory, std::vector<int> world_ranks,
                int world_rank, int world_size)
      : comm_(comm), device_(device), memory_(std::move(memory)), world_ranks_(std::move(world_ranks)),
        world_rank_(world_rank), world_size_(world_size) {
    activate();
    check_nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank", comm_);
    check_nccl(ncclCommCount(comm_, &size_), "ncclCommCount", comm_);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags (NCCL stream)");
    barrier_word_ = memory_->allocate(sizeof(int));
  }

  ~NcclTransport() override {
    // After abandon(): the communicator is aborted and nothing blocks; its buffers may still be
    // referenced by aborted work, so the staging word is leaked.
    if (cudaSetDevice(device_) != cudaSuccess) return;
    if (!aborted_) {
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
      memory_->release(barrier_word_);
    }
    for (auto& slot : slots_)
      if (slot.event) cudaEventDestroy(slot.event);
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
  }
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank() const override { return world_rank_; }
  int world_size() const override { return world_size_; }
  std::vector<int> world_ranks() const override { return world_ranks_; }
  const char* library_name() const override { return "nccl"; }
  // NCCL has no tags: messages between two ranks arrive in issue order, which the engine's one-at-a-
  // time, same-order operations already give; any tag is accepted.
  int max_tag() const override { return INT_MAX; }
  std::size_t max_count() const override { return std::size_t(1) << 40; }
  DeviceMemory* device_memory() const override { return memory_.get(); }

  TransportRequest isend(const void* data, std::size_t count, DType dtype, int peer, int) override {
    deferred_.push_back({true, const_cast<void*>(data), count, dtype, peer, new_slot()});
    return {std::uint64_t(deferred_.back().slot)};
  }
  TransportRequest irecv(void* data, std::size_t count, DType dtype, int peer, int) override {
    deferred_.push_back({false, data, count, dtype, peer, new_slot()});
    return {std::uint64_t(deferred_.back().slot)};
  }

  TransportRequest iall_reduce(void* data, std::size_t count, DType dtype) override {
    flush();
    after_queued_work();
    check_nccl(ncclAllReduce(data, data, count, nccl_type(dtype), ncclSum, comm_, stream_), "ncclAllReduce", comm_);
    return record();
  }
  TransportRequest ireduce_scatter(const void* in, void* out, std::size_t block, DType dtype) override {
    flush();
    after_queued_work();
    check_nccl(ncclReduceScatter(in, out, block, nccl_type(dtype), ncclSum, comm_, stream_), "ncclReduceScatter", comm_);
    return record();
  }
  TransportRequest iall_gather(const void* in, void* out, std::size_t block, DType dtype) override {
    flush();
    after_queued_work();
    check_nccl(ncclAllGather(in, out, block, nccl_type(dtype), comm_, stream_), "ncclAllGather", comm_);
    return record();
  }
  TransportRequest ibarrier() override {  // an all-reduce of one word: done on a rank once all joined
    flush();
    check_nccl(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_, stream_), "ncclAllReduce (barrier)",
               comm_);
    return record();
  }

  bool test_all(TransportRequest* requests, int n) override {
    flush();
    ncclResult_t async_state = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm_, &async_state), "ncclCommGetAsyncError", comm_);
    if (async_state != ncclSuccess && async_state != ncclInProgress)
      nccl_failed(async_state, "NCCL operation (asynchronous error)", comm_);
    for (int i = 0; i < n; ++i) {
      const cudaError_t status = cudaEventQuery(slots_.at(requests[i].word).event);
      if (status == cudaErrorNotReady) return false;
      check_cuda(status, "cudaEventQuery (NCCL request)");
    }
    for (int i = 0; i < n; ++i) release_slot(int(requests[i].word));
    return true;
  }

  std::unique_ptr<Transport> split(int color, int key) override {
    flush();
    ncclComm_t child = nullptr;
    check_nccl(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, nullptr), "ncclCommSplit", comm_);
    if (!child) return nullptr;
    // The child's world ranks: an all-gather of each member's world rank over the child.
    int child_size = 0;
    check_nccl(ncclCommCount(child, &child_size), "ncclCommCount", child);
    auto* mine = static_cast<int*>(memory_->allocate(sizeof(int)));
    auto* all = static_cast<int*>(memory_->allocate(sizeof(int) * std::size_t(child_size)));
    memory_->to_device(mine, &world_rank_, sizeof(int));
    check_nccl(ncclAllGather(mine, all, 1, ncclInt32, child, stream_), "ncclAllGather (split: world ranks)", child);
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (split)");
    std::vector<int> ranks(std::size_t(child_size), -1);
    memory_->to_host(ranks.data(), all, sizeof(int) * std::size_t(child_size));
    memory_->release(mine);
    memory_->release(all);
    return std::make_unique<NcclTransport>(child, device_, memory_, std::move(ranks), world_rank_, world_size_);
  }

  void abandon() override {
    if (aborted_) return;
    aborted_ = true;
    ncclCommAbort(comm_);  // ends the NCCL kernels still waiting for peers; never blocks on them
  }

 private:
  struct Slot {
    cudaEvent_t event = nullptr;
    bool used = false;
  };
  struct Deferred {
    bool send;
    void* data;
    std::size_t count;
    DType dtype;
    int peer;
    int slot;
  };

  void activate() { check_cuda(cudaSetDevice(device_), "cudaSetDevice (NCCL transport)"); }

  int new_slot() {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].used) {
        slots_[i].used = true;
        return int(i);
      }
    slots_.push_back({nullptr, true});
    return int(slots_.size() - 1);
  }
  void release_slot(int i) {
    Slot& s = slots_.at(std::size_t(i));
    if (s.event) free_events_.push_back(s.event);
    s.event = nullptr;
    s.used = false;
  }
  cudaEvent_t event_now() {
    cudaEvent_t e = nullptr;
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    } else {
      check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    check_cuda(cudaEventRecord(e, stream_), "cudaEventRecord (NCCL request)");
    return e;
  }
  TransportRequest record() {
    const int slot = new_slot();
    slots_[std::size_t(slot)].event = event_now();
    return {std::uint64_t(slot)};
  }

  // Before NCCL reads a device buffer: the device work queued so far (the compute queue's, which may
  // still be writing it) is complete (device_memory.hpp, "Ordering"). Costs the overlap of a
  // collective with the kernels queued before its submission, never with later ones.
  void after_queued_work() { memory_->wait_for_device_work(); }

  // Launches the queued point-to-point calls as one NCCL group; each gets its completion event.
  void flush() {
    activate();
    if (deferred_.empty()) return;
    after_queued_work();
    check_nccl(ncclGroupStart(), "ncclGroupStart", comm_);
    for (const Deferred& d : deferred_) {
      if (d.send)
        check_nccl(ncclSend(d.data, d.count, nccl_type(d.dtype), d.peer, comm_, stream_), "ncclSend", comm_);
      else
        check_nccl(ncclRecv(d.data, d.count, nccl_type(d.dtype), d.peer, comm_, stream_), "ncclRecv", comm_);
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", comm_);
    for (const Deferred& d : deferred_) slots_[std::size_t(d.slot)].event = event_now();
    deferred_.clear();
  }

  ncclComm_t comm_;
  int device_;
  std::shared_ptr<DeviceMemory> memory_;
  std::vector<int> world_ranks_;
  int world_rank_, world_size_;
  int rank_ = 0, size_ = 1;
  cudaStream_t stream_ = nullptr;
  void* barrier_word_ = nullptr;
  bool aborted_ = false;
  std::vector<Slot> slots_;
  std::vector<cudaEvent_t> free_events_;
  std::vector<Deferred> deferred_;
};

}  // namespace

bool nccl_transport_available() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm base, int device_index, CommOptions options) {
  int rank = 0, size = 1, world_rank = 0, world_size = 1;
  MPI_Comm_rank(base, &rank);
  MPI_Comm_size(base, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  auto memory = make_cuda_device_memory(device_index);  // UsageError when the device is not visible
  ncclUniqueId id{};
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
  MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, base);
  std::vector<int> world_ranks(std::size_t(size), -1);
  MPI_Allgather(&world_rank, 1, MPI_INT, world_ranks.data(), 1, MPI_INT, base);
  check_cuda(cudaSetDevice(device_index), "cudaSetDevice (NCCL set-up)");
  ncclComm_t comm = nullptr;
  const ncclResult_t status = ncclCommInitRank(&comm, size, id, rank);
  if (status == ncclInvalidUsage)
    throw UsageError("NCCL refused to create the communicator on CUDA device " + std::to_string(device_index) + " (" +
                     ncclGetErrorString(status) +
                     "): NCCL needs one GPU per rank; for ranks sharing a GPU use --transport mpi (host staging)");
  check_nccl(status, "ncclCommInitRank", nullptr);
  return make_communicator(std::make_unique<NcclTransport>(comm, device_index, std::move(memory), std::move(world_ranks),
                                                           world_rank, world_size),
                           std::move(options));
}

}  // namespace shardtrain
