// Device buffers through the comm engine, without a device (communicator.hpp "Device buffers",
// transport.hpp "Where buffers live"): a fake DeviceMemory whose "device" pointers point at guard
// memory full of NaN while the real bytes live in a shadow store reachable only through
// to_host/to_device/add. So a transport that were handed a device pointer unstaged would read NaN
// and the sums would show it; the checks below are exact (bitwise), so staging that dropped, moved
// or reordered anything fails.
//   * host transport (the fake, as MPI): device buffers staged through host memory ("W ranks
//     sharing one GPU" with the MPI transport); host buffers on the same communicator untouched;
//   * device transport (the fake behind a wrapper that takes device pointers only, as NCCL): host
//     buffers staged to the device, the canonical all-reduce's additions done by DeviceMemory::add,
//     and every pointer the transport got checked to be device memory.
// At 1, 2 and 4 ranks; results bitwise equal to the serial canonical tree and to the same
// operations on host buffers over the plain fake transport.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "fake_transport.hpp"
#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/comm/transport.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using std::chrono::milliseconds;
using test::bitwise_equal;

namespace {

// "Device" memory: allocate() returns guard memory (NaN bytes); the data is in a shadow store.
class FakeDeviceMemory final : public DeviceMemory {
 public:
  const char* name() const override { return "fake-device"; }
  bool is_device(const void* ptr) const override { return find(ptr) != nullptr; }
  void* allocate(std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto a = std::make_unique<Allocation>();
    a->guard.assign(std::max<std::size_t>(bytes, 1), 0xff);  // 0xffffffff is a NaN
    a->store.assign(std::max<std::size_t>(bytes, 1), 0);
    void* ptr = a->guard.data();
    allocations_[reinterpret_cast<std::uintptr_t>(ptr)] = std::move(a);
    return ptr;
  }
  void release(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    allocations_.erase(reinterpret_cast<std::uintptr_t>(ptr));
  }
  void wait_for_device_work() override { waits.fetch_add(1); }
  void to_host(void* host, const void* device, std::size_t bytes) override {
    std::memcpy(host, shadow(device, bytes), bytes);
  }
  void to_device(void* device, const void* host, std::size_t bytes) override {
    std::memcpy(shadow(device, bytes), host, bytes);
  }
  void add(void* out, const void* a, const void* b, std::size_t n, DType dtype) override {
    adds.fetch_add(1);
    if (dtype == DType::kFloat64) add_typed<double>(out, a, b, n);
    else add_typed<float>(out, a, b, n);
  }
  // The shadow bytes behind a device pointer (for the wrapper transport below and the checks).
  unsigned char* shadow(const void* device, std::size_t bytes) {
    Found f = find(device);
    if (!f.allocation || f.offset + bytes > f.allocation->store.size())
      throw std::runtime_error("fake device: pointer outside any device allocation");
    return f.allocation->store.data() + f.offset;
  }
  std::atomic<int> adds{0};
  std::atomic<int> waits{0};  // wait_for_device_work calls: one per device -> host staging copy

 private:
  struct Allocation {
    std::vector<unsigned char> guard, store;
  };
  struct Found {
    Allocation* allocation = nullptr;
    std::size_t offset = 0;
    explicit operator bool() const { return allocation != nullptr; }
    bool operator!=(std::nullptr_t) const { return allocation != nullptr; }
  };
  Found find(const void* ptr) const {
    std::lock_guard<std::mutex> lock(mu_);
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = allocations_.upper_bound(p);
    if (it == allocations_.begin()) return {};
    --it;
    if (p >= it->first + it->second->guard.size()) return {};
    return {it->second.get(), p - it->first};
  }
  template <typename T>
  void add_typed(void* out, const void* a, const void* b, std::size_t n) {
    if (n == 0) return;  // an empty segment of a halving-doubling step: memcpy of an empty vector's null data is UB
    const std::size_t bytes = n * sizeof(T);
    std::vector<T> x(n), y(n);
    std::memcpy(x.data(), shadow(a, bytes), bytes);
    std::memcpy(y.data(), shadow(b, bytes), bytes);
    for (std::size_t i = 0; i < n; ++i) x[i] = x[i] + y[i];
    std::memcpy(shadow(out, bytes), x.data(), bytes);
  }
  mutable std::mutex mu_;
  std::map<std::uintptr_t, std::unique_ptr<Allocation>> allocations_;
};

// A device transport like NCCL over the fake: every buffer must be fake device memory (a host one
// counts as a violation and goes through as NaN guard bytes would: the test fails either way); the
// inner fake transport works on the shadow bytes.
class DeviceOnlyTransport final : public Transport {
 public:
  DeviceOnlyTransport(std::unique_ptr<Transport> inner, FakeDeviceMemory& memory, std::atomic<int>& violations)
      : inner_(std::move(inner)), memory_(memory), violations_(violations) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int world_rank() const override { return inner_->world_rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::vector<int> world_ranks() const override { return inner_->world_ranks(); }
  const char* library_name() const override { return "fake-device"; }
  int max_tag() const override { return inner_->max_tag(); }
  std::size_t max_count() const override { return inner_->max_count(); }
  DeviceMemory* device_memory() const override { return &memory_; }
  TransportRequest isend(const void* data, std::size_t count, DType dtype, int peer, int tag) override {
    return inner_->isend(mapped(data, count * dtype_size(dtype)), count, dtype, peer, tag);
  }
  TransportRequest irecv(void* data, std::size_t count, DType dtype, int peer, int tag) override {
    return inner_->irecv(mapped(data, count * dtype_size(dtype)), count, dtype, peer, tag);
  }
  TransportRequest iall_reduce(void* data, std::size_t count, DType dtype) override {
    return inner_->iall_reduce(mapped(data, count * dtype_size(dtype)), count, dtype);
  }
  TransportRequest ireduce_scatter(const void* in, void* out, std::size_t block, DType dtype) override {
    const std::size_t bytes = block * dtype_size(dtype);
    return inner_->ireduce_scatter(mapped(in, bytes * size()), mapped(out, bytes), block, dtype);
  }
  TransportRequest iall_gather(const void* in, void* out, std::size_t block, DType dtype) override {
    const std::size_t bytes = block * dtype_size(dtype);
    return inner_->iall_gather(mapped(in, bytes), mapped(out, bytes * size()), block, dtype);
  }
  TransportRequest ibarrier() override { return inner_->ibarrier(); }
  bool test_all(TransportRequest* requests, int n) override { return inner_->test_all(requests, n); }
  std::unique_ptr<Transport> split(int color, int key) override {
    auto child = inner_->split(color, key);
    return child ? std::make_unique<DeviceOnlyTransport>(std::move(child), memory_, violations_) : nullptr;
  }
  void abandon() override { inner_->abandon(); }

 private:
  void* mapped(const void* ptr, std::size_t bytes) {
    if (bytes == 0) return const_cast<void*>(ptr);
    if (!memory_.is_device(ptr)) {
      violations_.fetch_add(1);
      return const_cast<void*>(ptr);
    }
    return memory_.shadow(ptr, bytes);
  }
  std::unique_ptr<Transport> inner_;
  FakeDeviceMemory& memory_;
  std::atomic<int>& violations_;
};

CommOptions options_with(std::shared_ptr<DeviceMemory> memory, AllReduceAlgorithm algorithm) {
  CommOptions o;
  o.name = "staged";
  o.timeout = milliseconds(20000);
  o.all_reduce = algorithm;
  o.device_memory = std::move(memory);
  return o;
}

// Rank r's input: varied magnitudes, so the order of additions shows in the bits.
std::vector<float> input(std::size_t n, int rank) {
  auto v = test::random_floats(n, 777 + unsigned(rank), -1.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) v[i] *= std::ldexp(1.0f, int((i + std::size_t(rank)) % 11));
  return v;
}

// What one rank got from each operation, copied to the host.
struct Results {
  std::vector<float> canonical, fast, scattered, gathered, broadcast;
  double host_sum = 0;
};

// The same five operations on one communicator: device buffers (from `memory`, or host vectors
// when `memory` is null), plus a host double all-reduced beside them.
Results run_ops(Communicator& comm, FakeDeviceMemory* memory, std::size_t n, int rank) {
  const int W = comm.size();
  std::vector<std::vector<unsigned char>> host_buffers;
  auto buffer = [&](const std::vector<float>& values) -> float* {
    const std::size_t bytes = values.size() * sizeof(float);
    if (memory) {
      void* p = memory->allocate(bytes);
      memory->to_device(p, values.data(), bytes);
      return static_cast<float*>(p);
    }
    host_buffers.emplace_back(bytes);
    std::memcpy(host_buffers.back().data(), values.data(), bytes);
    return reinterpret_cast<float*>(host_buffers.back().data());
  };
  auto read = [&](const float* p, std::size_t count) {
    std::vector<float> out(count);
    if (memory) memory->to_host(out.data(), p, count * sizeof(float));
    else std::memcpy(out.data(), p, count * sizeof(float));
    return out;
  };
  const auto x = input(n, rank);
  Results r;
  float* canonical = buffer(x);
  comm.all_reduce_canonical(canonical, n);
  r.canonical = read(canonical, n);
  float* fast = buffer(x);
  comm.all_reduce(fast, n);
  r.fast = read(fast, n);
  const std::size_t block = 5;
  float* scatter_in = buffer(input(block * std::size_t(W), rank + 10));
  float* scatter_out = buffer(std::vector<float>(block, 0.0f));
  comm.reduce_scatter(scatter_in, scatter_out, block);
  r.scattered = read(scatter_out, block);
  float* gather_in = buffer(input(block, rank + 20));
  float* gather_out = buffer(std::vector<float>(block * std::size_t(W), 0.0f));
  comm.all_gather(gather_in, gather_out, block);
  r.gathered = read(gather_out, block * std::size_t(W));
  float* bcast = buffer(input(7, rank + 30));
  comm.broadcast(bcast, 7, W - 1);
  r.broadcast = read(bcast, 7);
  r.host_sum = double(rank) + 0.5;  // a host buffer on the same communicator: never staged
  comm.all_reduce(&r.host_sum, 1);
  return r;
}

}  // namespace

TEST_CASE("comm staging: device buffers over a host transport equal the host run bitwise", "[comm][staging]") {
  const std::size_t n = 1001;  // odd: halving splits unevenly
  for (int W : {1, 2, 4}) {
    for (auto algorithm : {AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kLibrary}) {
      INFO("W " << W << ", all-reduce " << (algorithm == AllReduceAlgorithm::kLibrary ? "library" : "halving"));
      auto memory = std::make_shared<FakeDeviceMemory>();
      std::vector<Results> staged(W), host(W);
      auto world = std::make_shared<test::FakeWorld>(W);
      test::run_ranks(W, [&](int r) {
        auto comm = make_communicator(world->transport(r), options_with(memory, algorithm));
        staged[r] = run_ops(*comm, memory.get(), n, r);
        auto plain = make_communicator(world->transport(r), options_with(nullptr, algorithm));
        host[r] = run_ops(*plain, nullptr, n, r);
      });
      std::vector<std::vector<float>> inputs;
      for (int r = 0; r < W; ++r) inputs.push_back(input(n, r));
      const auto tree = test::tree_sum(inputs, 0, inputs.size());
      for (int r = 0; r < W; ++r) {
        INFO("rank " << r);
        CHECK(bitwise_equal(staged[r].canonical, tree));
        CHECK(bitwise_equal(staged[r].fast, host[r].fast));
        CHECK(bitwise_equal(staged[r].scattered, host[r].scattered));
        CHECK(bitwise_equal(staged[r].gathered, host[r].gathered));
        CHECK(bitwise_equal(staged[r].broadcast, host[r].broadcast));
        CHECK(bitwise_equal(staged[r].broadcast, input(7, W - 1 + 30)));
        CHECK(staged[r].host_sum == host[r].host_sum);
        CHECK(staged[r].host_sum == 0.5 * W + W * (W - 1) / 2.0);
      }
      CHECK(memory->adds.load() == 0);  // a host transport adds on the host
      // Every device buffer read for a host transport waited for queued device work first: per rank
      // the two all-reduces, the broadcast and the two inputs of reduce-scatter and all-gather.
      CHECK(memory->waits.load() == 5 * W);
    }
  }
}

TEST_CASE("comm staging: a device-only transport gets device pointers only, host buffers staged in", "[comm][staging]") {
  const std::size_t n = 1001;
  for (int W : {1, 2, 4}) {
    INFO("W " << W);
    auto memory = std::make_shared<FakeDeviceMemory>();
    std::atomic<int> violations{0};
    std::vector<Results> device(W), host(W);
    auto world = std::make_shared<test::FakeWorld>(W);
    test::run_ranks(W, [&](int r) {
      // No CommOptions::device_memory: the transport's own device tells where pointers live.
      auto comm = make_communicator(std::make_unique<DeviceOnlyTransport>(world->transport(r), *memory, violations),
                                    options_with(nullptr, AllReduceAlgorithm::kHalvingDoubling));
      device[r] = run_ops(*comm, memory.get(), n, r);
      auto plain = make_communicator(world->transport(r), options_with(nullptr, AllReduceAlgorithm::kHalvingDoubling));
      host[r] = run_ops(*plain, nullptr, n, r);
    });
    CHECK(violations.load() == 0);
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < W; ++r) inputs.push_back(input(n, r));
    const auto tree = test::tree_sum(inputs, 0, inputs.size());
    for (int r = 0; r < W; ++r) {
      INFO("rank " << r);
      CHECK(bitwise_equal(device[r].canonical, tree));
      CHECK(bitwise_equal(device[r].fast, host[r].fast));
      CHECK(bitwise_equal(device[r].scattered, host[r].scattered));
      CHECK(bitwise_equal(device[r].gathered, host[r].gathered));
      CHECK(bitwise_equal(device[r].broadcast, host[r].broadcast));
      CHECK(device[r].host_sum == host[r].host_sum);
    }
    // The halving all-reduces (canonical, fast, and the host double staged in) add on the device:
    // log2(W) rounds each on each rank.
    int rounds = 0;
    for (int d = 1; d < W; d <<= 1) ++rounds;
    CHECK(memory->adds.load() == 3 * rounds * W);
  }
}
