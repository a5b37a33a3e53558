// An in-process fake Transport (shardtrain/comm/transport.hpp) for the comm engine's tests: the N
// ranks of a job are threads of the test process, exchanging messages through mailboxes, so the
// engine's queue, algorithms, groups, timeouts, flight records and fault injection run without MPI.
//
//   auto world = std::make_shared<FakeWorld>(4);
//   test::run_ranks(4, [&](int r) { auto comm = make_communicator(world->transport(r), options); ... });
//
// Semantics (the transport.hpp contract, simply):
//   * A send copies its bytes into the receiver's mailbox at once (eager), so it completes at once;
//     a receive completes when test_all finds the message. Messages of one (group, sender,
//     receiver, channel, tag) arrive in the order sent.
//   * Library collectives are made of such messages on their own channel, numbered per group in
//     call order (as MPI matches them). Their sums add the ranks' contributions in rank order
//     ((x0 + x1) + x2) + ..., which is NOT the engine's canonical tree for 4 ranks or more.
//   * withhold(r): from then on nothing rank r sends is delivered (it is dropped), so its peers wait
//     in vain: a collective timeout, with r still running.
//   * transport(r) called k times on every rank gives k distinct world groups (like MPI_Comm_dup):
//     the i-th call of each rank joins the i-th group. split() is collective over the group.
// Thread safety: a world is shared by all rank threads (one mutex); a transport is used by one
// thread at a time, as the engine does.
#pragma once
#include <climits>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "shardtrain/comm/transport.hpp"

namespace shardtrain::test {

class FakeWorld : public std::enable_shared_from_this<FakeWorld> {
 public:
  // `max_count`: the transports' count limit (Transport::max_count), small to test the refusal.
  explicit FakeWorld(int size, std::size_t max_count = std::size_t(INT_MAX));
  int size() const { return size_; }
  std::size_t max_count() const { return max_count_; }

  // A new world group's transport for `world_rank` (see above: the i-th call per rank).
  std::unique_ptr<Transport> transport(int world_rank);

  // Nothing `world_rank` sends from now on is delivered.
  void withhold(int world_rank);

  // ---- mailboxes, for FakeTransport ----
  struct Key {
    std::string group;  // the group's context name, the same on every member
    int from = 0, to = 0;  // group ranks
    int channel = 0;       // point-to-point or collective
    std::uint64_t tag = 0;
    bool operator<(const Key& o) const {
      return std::tie(group, from, to, channel, tag) < std::tie(o.group, o.from, o.to, o.channel, o.tag);
    }
  };
  // Queues `bytes` under `key` unless `sender_world_rank` is withheld.
  void post(const Key& key, int sender_world_rank, std::vector<unsigned char> bytes);
  // Takes the oldest message under `key` into `out`; false when there is none yet.
  bool take(const Key& key, std::vector<unsigned char>& out);

 private:
  int size_;
  std::size_t max_count_;
  std::mutex mu_;
  std::map<Key, std::deque<std::vector<unsigned char>>> boxes_;
  std::set<int> withheld_;
  std::vector<int> world_groups_made_;  // per rank: transport() calls so far
};

// Runs body(rank) for rank 0..size-1, each on its own thread, all at once; after joining them,
// rethrows the exception of the lowest rank that threw. Catch2's assertions are not thread-safe:
// a body stores what it saw, and the test checks it on the calling thread.
void run_ranks(int size, const std::function<void(int rank)>& body);

}  // namespace shardtrain::test
