#include "algorithms.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <thread>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace shardtrain::comm_detail {

Driver::Driver(Transport& transport, const std::atomic<int>& waiters, std::function<bool()> abandon)
    : transport_(transport),
      waiters_(waiters),
      abandon_(std::move(abandon)),
      tag_span_(std::max(1, transport.max_tag() / 64 - 1)),
      scratch_(transport.device_memory()),
      header_scratch_(transport.device_memory()) {}

// While the compute thread computes, after a short spin the thread sleeps between tests (backing off
// to kMaxPollSleep): a rank's communication thread shares its core with the compute thread, and
// yield-spinning there took ~6% of a training step at W = 2 (measured with bench/specs/ddp.json); a
// test every <= 100 us still drives Open MPI's non-blocking collectives well within a bucket's time.
// While a caller is blocked in wait(), its compute thread needs no core, so the thread only yields
// between tests (every nap there would be exposed communication time); yielding rather than
// spinning leaves the core to other ranks when ranks are oversubscribed.
bool Driver::drive(TransportRequest* requests, int n) {
  static constexpr auto kMaxPollSleep = std::chrono::microseconds(100);
  int spins = 0;
  auto nap = std::chrono::microseconds(5);
  for (;;) {
    if (transport_.test_all(requests, n)) return true;
    if ((spins & 255) == 255 && abandon_()) return false;
    if (++spins <= 32) continue;
    if (waiters_.load(std::memory_order_relaxed) > 0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, kMaxPollSleep);
    }
  }
}

bool Driver::linear_broadcast(void* data, std::size_t count, DType dtype, int root, std::uint64_t seq) {
  Transport& t = transport_;
  const int tag = 64 * int(seq % std::uint64_t(tag_span_));
  if (t.rank() != root) {
    TransportRequest req = t.irecv(data, count, dtype, root, tag);
    return drive(&req, 1);
  }
  for (int peer = 0; peer < t.size(); ++peer) {
    if (peer == root) continue;
    TransportRequest req = t.isend(data, count, dtype, peer, tag);
    if (!drive(&req, 1)) return false;
  }
  return true;
}

void Driver::abandon_scratch() {
  scratch_.abandon();
  header_scratch_.abandon();
}

bool Driver::exchange_headers(const OpHeader& mine, std::vector<OpHeader>& all) {
  static_assert(sizeof(OpHeader) == 5 * sizeof(std::uint64_t));
  constexpr std::size_t kWords = sizeof(OpHeader) / sizeof(std::uint64_t);
  Transport& t = transport_;
  const int W = t.size(), r = t.rank();
  all.assign(std::size_t(W), mine);
  if (W == 1) return true;
  const int tag = 64 * int(mine.seq % std::uint64_t(tag_span_)) + 63;
  DeviceMemory* device = t.device_memory();
  auto* space = device ? static_cast<OpHeader*>(header_scratch_.get(std::size_t(W) * sizeof(OpHeader))) : all.data();
  if (device) device->to_device(space + r, &mine, sizeof mine);
  // Every message posted first, then completed pair by pair: no rank waits on a peer's order.
  std::vector<TransportRequest> reqs;
  reqs.reserve(2 * std::size_t(W - 1));
  for (int k = 1; k < W; ++k) {
    const int from = (r - k + W) % W, to = (r + k) % W;
    reqs.push_back(t.irecv(space + from, kWords, DType::kUInt64, from, tag));
    reqs.push_back(t.isend(space + r, kWords, DType::kUInt64, to, tag));
  }
  for (std::size_t i = 0; i < reqs.size(); i += 2)
    if (!drive(&reqs[i], 2)) return false;
  if (device) device->to_host(all.data(), space, std::size_t(W) * sizeof(OpHeader));
  return true;
}

bool Driver::halving_doubling(void* data, std::size_t n, DType dtype, std::uint64_t seq) {
  return dtype == DType::kFloat32 ? halving_doubling_typed(static_cast<float*>(data), n, seq)
                                  : halving_doubling_typed(static_cast<double*>(data), n, seq);
}

bool Driver::pairwise_reduce_scatter(const void* in, void* out, std::size_t block, DType dtype, std::uint64_t seq) {
  switch (dtype) {
    case DType::kFloat32:
      return pairwise_reduce_scatter_typed(static_cast<const float*>(in), static_cast<float*>(out), block, seq);
    case DType::kFloat64:
      return pairwise_reduce_scatter_typed(static_cast<const double*>(in), static_cast<double*>(out), block, seq);
    case DType::kInt32:
      return pairwise_reduce_scatter_typed(static_cast<const std::int32_t*>(in), static_cast<std::int32_t*>(out), block, seq);
    case DType::kInt64:
      return pairwise_reduce_scatter_typed(static_cast<const std::int64_t*>(in), static_cast<std::int64_t*>(out), block, seq);
    case DType::kUInt64:
      return pairwise_reduce_scatter_typed(static_cast<const std::uint64_t*>(in), static_cast<std::uint64_t*>(out), block, seq);
    case DType::kUInt8:
      break;
  }
  throw std::logic_error("pairwise_reduce_scatter: no sum of uint8");
}

namespace {
// a + b, integers wrapping (as the library's sums of them do) rather than overflowing.
template <typename T>
T wrapping_sum(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));
  } else {
    return a + b;
  }
}
}  // namespace

template <typename T>
bool Driver::pairwise_reduce_scatter_typed(const T* in, T* out, std::size_t block, std::uint64_t seq) {
  Transport& t = transport_;
  const int W = t.size(), r = t.rank();
  const T* own = in + std::size_t(r) * block;
  if (W == 1 || block == 0) {
    std::copy(own, own + block, out);
    return true;
  }
  const DType type = dtype_of<T>();
  const int tag = 64 * int(seq % std::uint64_t(tag_span_));
  // Peer q's block r lands in slot q (q < r) or q - 1 (q > r); every exchange posted at once.
  T* received = static_cast<T*>(scratch_.get(std::size_t(W - 1) * block * sizeof(T)));
  const auto slot = [&](int q) { return received + std::size_t(q < r ? q : q - 1) * block; };
  std::vector<TransportRequest> reqs;
  reqs.reserve(2 * std::size_t(W - 1));
  for (int k = 1; k < W; ++k) {
    const int to = (r + k) % W, from = (r - k + W) % W;
    reqs.push_back(t.irecv(slot(from), block, type, from, tag));
    reqs.push_back(t.isend(in + std::size_t(to) * block, block, type, to, tag));
  }
  // Completed pair by pair (a transport tests at most a few requests at once); every one is posted.
  const auto posted = std::chrono::steady_clock::now();
  for (int k = 1; k < W; ++k) {
    if (!drive(&reqs[2 * std::size_t(k - 1)], 2)) return false;
    count_exchange((r - k + W) % W, block * sizeof(T), posted);
  }
  // Summed in rank order, whatever the arrival order: rank 0's block + rank 1's + ...
  const auto block_of = [&](int q) { return q == r ? own : slot(q); };
  std::copy(block_of(0), block_of(0) + block, out);
  for (int q = 1; q < W; ++q) {
    const T* part = block_of(q);
    for (std::size_t i = 0; i < block; ++i) out[i] = wrapping_sum(out[i], part[i]);
  }
  return true;
}

void Driver::count_exchange(int peer, std::size_t bytes_received, std::chrono::steady_clock::time_point posted) {
  if (peer_stats_.empty()) peer_stats_.resize(std::size_t(transport_.size()));
  PeerStats& p = peer_stats_[std::size_t(peer)];
  p.bytes += bytes_received;
  p.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count();
}

template <typename T>
bool Driver::halving_doubling_typed(T* data, std::size_t n, std::uint64_t seq) {
  Transport& t = transport_;
  const int W = t.size(), r = t.rank();
  if (W == 1) return true;
  const DType type = dtype_of<T>();
  const int tag_base = 64 * int(seq % std::uint64_t(tag_span_));
  T* tmp = static_cast<T*>(scratch_.get((n / 2 + 1) * sizeof(T)));
  DeviceMemory* device = t.device_memory();
  std::array<std::pair<std::size_t, std::size_t>, 32> parents;  // one per halving round: log2(W) <= 31
  int depth = 0;
  std::size_t lo = 0, hi = n;
  int round = 0;
  // Recursive halving: after the round with pair distance d, this rank holds, for its half of the
  // parent range, the sum over the aligned block of 2d ranks containing it (lower + upper).
  for (int d = 1; d < W; d <<= 1, ++round) {
    const int partner = r ^ d;
    const bool lower = (r & d) == 0;
    const std::size_t mid = lo + (hi - lo) / 2;
    parents[depth++] = {lo, hi};
    const std::size_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const std::size_t send_lo = lower ? mid : lo, send_hi = lower ? hi : mid;
    const auto posted = std::chrono::steady_clock::now();
    TransportRequest reqs[2] = {t.irecv(tmp, keep_hi - keep_lo, type, partner, tag_base + round),
                                t.isend(data + send_lo, send_hi - send_lo, type, partner, tag_base + round)};
    if (!drive(reqs, 2)) return false;
    count_exchange(partner, (keep_hi - keep_lo) * sizeof(T), posted);
    T* mine = data + keep_lo;
    const std::size_t m = keep_hi - keep_lo;
    if (device)
      device->add(mine, lower ? mine : tmp, lower ? tmp : mine, m, type);
    else if (lower)
      for (std::size_t i = 0; i < m; ++i) mine[i] = mine[i] + tmp[i];
    else
      for (std::size_t i = 0; i < m; ++i) mine[i] = tmp[i] + mine[i];
    lo = keep_lo;
    hi = keep_hi;
  }
  // Recursive doubling: exchange finished pieces, distance W/2 ... 1 (copies only).
  for (int d = W / 2; d >= 1; d >>= 1, ++round) {
    const auto [plo, phi] = parents[--depth];
    const int partner = r ^ d;
    const bool lower = (r & d) == 0;
    const std::size_t mid = plo + (phi - plo) / 2;
    const std::size_t other_lo = lower ? mid : plo, other_hi = lower ? phi : mid;
    const auto posted = std::chrono::steady_clock::now();
    TransportRequest reqs[2] = {t.irecv(data + other_lo, other_hi - other_lo, type, partner, tag_base + round),
                                t.isend(data + lo, hi - lo, type, partner, tag_base + round)};
    if (!drive(reqs, 2)) return false;
    count_exchange(partner, (other_hi - other_lo) * sizeof(T), posted);
    lo = plo;
    hi = phi;
  }
  return true;
}

}  // namespace shardtrain::comm_detail
