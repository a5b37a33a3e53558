#include "fake_transport.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <thread>

#include "shardtrain/base/error.hpp"

namespace shardtrain::test {
namespace {

enum Channel { kPointToPoint = 0, kCollective = 1 };

std::vector<unsigned char> copy_bytes(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  return bytes ? std::vector<unsigned char>(p, p + bytes) : std::vector<unsigned char>();
}

template <typename T>
void add_typed(void* acc, const void* x, std::size_t n) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(x);
  for (std::size_t i = 0; i < n; ++i) a[i] = a[i] + b[i];
}

// acc[0..n) += x[0..n), elements of `dtype`.
void add_into(void* acc, const void* x, std::size_t n, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return add_typed<float>(acc, x, n);
    case DType::kFloat64: return add_typed<double>(acc, x, n);
    case DType::kInt32: return add_typed<std::int32_t>(acc, x, n);
    case DType::kInt64: return add_typed<std::int64_t>(acc, x, n);
    case DType::kUInt64: return add_typed<std::uint64_t>(acc, x, n);
    case DType::kUInt8: return add_typed<std::uint8_t>(acc, x, n);
  }
}

class FakeTransport final : public Transport {
 public:
  FakeTransport(std::shared_ptr<FakeWorld> world, std::string group, std::vector<int> members, int rank)
      : world_(std::move(world)), group_(std::move(group)), members_(std::move(members)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return int(members_.size()); }
  int world_rank() const override { return members_[rank_]; }
  int world_size() const override { return world_->size(); }
  std::vector<int> world_ranks() const override { return members_; }
  const char* library_name() const override { return "fake"; }
  int max_tag() const override { return 32767; }
  std::size_t max_count() const override { return world_->max_count(); }

  TransportRequest isend(const void* data, std::size_t count, DType dtype, int peer, int tag) override {
    send(peer, kPointToPoint, std::uint64_t(tag), copy_bytes(data, count * dtype_size(dtype)));
    return {};  // eager: complete
  }
  TransportRequest irecv(void* data, std::size_t count, DType dtype, int peer, int tag) override {
    Pending p;
    p.expect.push_back({key(peer, kPointToPoint, std::uint64_t(tag)), data, count * dtype_size(dtype)});
    return add(std::move(p));
  }

  TransportRequest iall_reduce(void* data, std::size_t count, DType dtype) override {
    const std::size_t bytes = count * dtype_size(dtype);
    Pending p = exchange(copy_bytes(data, bytes), bytes);
    p.finish = [this, data, count, dtype, bytes](Staging& s) {
      for (int q = 1; q < size(); ++q) add_into(s[0].data(), s[q].data(), count, dtype);
      if (bytes) std::memcpy(data, s[0].data(), bytes);
    };
    return add(std::move(p));
  }
  TransportRequest ireduce_scatter(const void* in, void* out, std::size_t block, DType dtype) override {
    const std::size_t bytes = block * dtype_size(dtype), all = bytes * std::size_t(size());
    Pending p = exchange(copy_bytes(in, all), all);
    p.finish = [this, out, block, dtype, bytes](Staging& s) {
      const std::size_t mine = bytes * std::size_t(rank_);
      for (int q = 1; q < size(); ++q) add_into(s[0].data() + mine, s[q].data() + mine, block, dtype);
      if (bytes) std::memcpy(out, s[0].data() + mine, bytes);
    };
    return add(std::move(p));
  }
  TransportRequest iall_gather(const void* in, void* out, std::size_t block, DType dtype) override {
    const std::size_t bytes = block * dtype_size(dtype);
    Pending p = exchange(copy_bytes(in, bytes), bytes);
    p.finish = [this, out, bytes](Staging& s) {
      for (int q = 0; q < size(); ++q)
        if (bytes) std::memcpy(static_cast<unsigned char*>(out) + bytes * std::size_t(q), s[q].data(), bytes);
    };
    return add(std::move(p));
  }
  TransportRequest ibarrier() override { return add(exchange({}, 0)); }

  bool test_all(TransportRequest* requests, int n) override {
    bool all = true;
    for (int i = 0; i < n; ++i)
      if (requests[i].word != 0) all = progress(slots_[requests[i].word - 1]) && all;
    if (!all) return false;
    for (int i = 0; i < n; ++i) {
      if (requests[i].word == 0) continue;
      slots_[requests[i].word - 1] = Pending();
      free_.push_back(requests[i].word - 1);
      requests[i].word = 0;
    }
    return true;
  }

  std::unique_ptr<Transport> split(int color, int key) override {
    const std::uint64_t tag = next_collective_++;
    const int mine[2] = {color, key};
    for (int q = 0; q < size(); ++q)
      if (q != rank_) send(q, kCollective, tag, copy_bytes(mine, sizeof mine));
    std::vector<std::array<int, 3>> all;  // (key, rank, color) of every rank
    all.push_back({key, rank_, color});
    std::vector<unsigned char> got;
    for (int q = 0; q < size(); ++q) {
      if (q == rank_) continue;
      while (!world_->take(this->key(q, kCollective, tag), got)) std::this_thread::yield();  // blocking, as MPI
      int theirs[2];
      std::memcpy(theirs, got.data(), sizeof theirs);
      all.push_back({theirs[1], q, theirs[0]});
    }
    if (color < 0) return nullptr;
    std::sort(all.begin(), all.end());  // by (key, rank)
    std::vector<int> members;
    int child_rank = 0;
    for (const auto& [k, q, c] : all) {
      if (c != color) continue;
      if (q == rank_) child_rank = int(members.size());
      members.push_back(members_[q]);
    }
    return std::make_unique<FakeTransport>(world_, group_ + "/" + std::to_string(tag) + ":" + std::to_string(color),
                                           std::move(members), child_rank);
  }

  // Pending receives are only ever filled by test_all on this thread, so nothing writes into an
  // abandoned buffer: nothing to do.
  void abandon() override {}

 private:
  struct Expect {
    FakeWorld::Key key;
    void* dst;
    std::size_t bytes;
    bool arrived = false;
  };
  using Staging = std::vector<std::vector<unsigned char>>;  // collectives: each rank's contribution
  struct Pending {
    std::vector<Expect> expect;
    Staging staging;
    std::function<void(Staging&)> finish;  // collectives: combine the staging once complete
    bool done = false;
  };

  FakeWorld::Key key(int from_rank, int channel, std::uint64_t tag) const {
    return {group_, from_rank, rank_, channel, tag};
  }
  void send(int to, int channel, std::uint64_t tag, std::vector<unsigned char> bytes) {
    world_->post({group_, rank_, to, channel, tag}, members_[rank_], std::move(bytes));
  }

  TransportRequest add(Pending p) {
    if (free_.empty()) {
      slots_.push_back(std::move(p));
      return {std::uint64_t(slots_.size())};
    }
    const std::size_t slot = free_.back();
    free_.pop_back();
    slots_[slot] = std::move(p);
    return {std::uint64_t(slot) + 1};
  }

  // A collective where every rank sends `mine` to every other: the pending receipt of the others',
  // staged by rank (staging[rank] = mine).
  Pending exchange(std::vector<unsigned char> mine, std::size_t bytes) {
    const std::uint64_t tag = next_collective_++;
    for (int q = 0; q < size(); ++q)
      if (q != rank_) send(q, kCollective, tag, mine);
    Pending p;
    p.staging.resize(std::size_t(size()));
    p.staging[std::size_t(rank_)] = std::move(mine);
    for (int q = 0; q < size(); ++q) {
      if (q == rank_) continue;
      p.staging[std::size_t(q)].resize(bytes);
      p.expect.push_back({key(q, kCollective, tag), nullptr, bytes});  // dst set by progress (staging moves)
    }
    return p;
  }

  // Takes what has arrived for `p`; true once complete (finish run).
  bool progress(Pending& p) {
    if (p.done) return true;
    std::vector<unsigned char> got;
    bool all = true;
    for (auto& e : p.expect) {
      if (e.arrived) continue;
      if (!world_->take(e.key, got)) {
        all = false;
        continue;
      }
      if (got.size() != e.bytes)
        throw CommunicationError("fake transport: a message of " + std::to_string(got.size()) + " bytes where " +
                                 std::to_string(e.bytes) + " were expected (group " + group_ + ")");
      void* dst = e.dst ? e.dst : p.staging[std::size_t(e.key.from)].data();
      if (e.bytes) std::memcpy(dst, got.data(), e.bytes);
      e.arrived = true;
    }
    if (!all) return false;
    if (p.finish) p.finish(p.staging);
    p.done = true;
    return true;
  }

  std::shared_ptr<FakeWorld> world_;
  std::string group_;
  std::vector<int> members_;  // world rank of each group rank
  int rank_;
  std::uint64_t next_collective_ = 0;
  std::vector<Pending> slots_;  // request word = slot + 1; word 0: complete
  std::vector<std::size_t> free_;
};

}  // namespace

FakeWorld::FakeWorld(int size, std::size_t max_count)
    : size_(size), max_count_(max_count), world_groups_made_(std::size_t(size), 0) {
  if (size < 1) throw UsageError("FakeWorld: size must be >= 1");
}

std::unique_ptr<Transport> FakeWorld::transport(int world_rank) {
  int index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = world_groups_made_.at(std::size_t(world_rank))++;
  }
  std::vector<int> all(static_cast<std::size_t>(size_));
  for (int q = 0; q < size_; ++q) all[std::size_t(q)] = q;
  return std::make_unique<FakeTransport>(shared_from_this(), "world" + std::to_string(index), std::move(all),
                                         world_rank);
}

void FakeWorld::withhold(int world_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  withheld_.insert(world_rank);
}

void FakeWorld::post(const Key& key, int sender_world_rank, std::vector<unsigned char> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (withheld_.count(sender_world_rank)) return;
  boxes_[key].push_back(std::move(bytes));
}

bool FakeWorld::take(const Key& key, std::vector<unsigned char>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = boxes_.find(key);
  if (it == boxes_.end() || it->second.empty()) return false;
  out = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) boxes_.erase(it);
  return true;
}

void run_ranks(int size, const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[std::size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace shardtrain::test
