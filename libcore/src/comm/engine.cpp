// The comm engine: Communicator (communicator.hpp) over any Transport (transport.hpp). A queue of
// operations run in order on one communication thread per communicator, a watchdog thread for
// timeouts, sequence numbers, the flight recorder, fault injection and accounting. No library calls
// here: they are the transport's.
#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "algorithms.hpp"
#include "engine_work.hpp"
#include "header_agreement.hpp"
#include "staging.hpp"
#include "shardtrain/comm/transport.hpp"

namespace shardtrain {
namespace {

using namespace comm_detail;  // EngineWork, Core (engine_work.hpp), the header agreement, Driver

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// CPU time consumed so far by the calling thread.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// The fault injection of a communicator, shared with the groups split from it afterwards, so that
// a skip-collective skips one collective among all of them.
struct FaultPlan {
  explicit FaultPlan(FaultInjection f) : spec(std::move(f)) {}
  const FaultInjection spec;
  std::atomic<bool> skip_used{false};
  std::atomic<bool> wrong_count_used{false};
};

// ---------------------------------------------------------------------------------------------

class EngineCommunicator final : public Communicator {
 public:
  // `step` and `faults`: a split child's, from its parent; a root starts at -1 with none.
  EngineCommunicator(std::unique_ptr<Transport> transport, CommOptions options, std::int64_t step,
                     std::shared_ptr<FaultPlan> faults)
      : core_(std::make_shared<Core>()),
        transport_(std::move(transport)),
        driver_(*transport_, core_->waiters, [this] { return should_abandon(); }),
        step_(step),
        faults_(std::move(faults)) {
    Core& c = *core_;
    c.options = std::move(options);
    if (c.options.timeout.count() <= 0) throw UsageError("collective timeout must be positive");
    c.rank = transport_->rank();
    c.size = transport_->size();
    c.world_rank = transport_->world_rank();
    c.world_size = transport_->world_size();
    const AllReduceAlgorithm algorithm = c.options.all_reduce;
    if (algorithm == AllReduceAlgorithm::kHalvingDoubling && !is_power_of_two(c.size))
      throw UsageError("--allreduce halving needs a power-of-two number of ranks in group '" + c.options.name +
                       "' (it has " + std::to_string(c.size) + "); use --allreduce auto or mpi");
    halving_all_reduce_ = algorithm == AllReduceAlgorithm::kHalvingDoubling ||
                          ((algorithm == AllReduceAlgorithm::kAuto || algorithm == AllReduceAlgorithm::kHierarchical) &&
                           is_power_of_two(c.size) && c.size > 1);
    FlightGroup group;
    group.name = c.options.name;
    group.rank = c.rank;
    group.size = c.size;
    group.world_ranks = transport_->world_ranks();
    group.phase = c.options.phase;
    c.recorder = register_flight_recorder(c.world_rank, std::move(group), c.options.recorder_capacity);
    c.name = c.recorder->name();
    c.stats.group_size = c.size;
    library_ = transport_->library_name();
    max_count_ = transport_->max_count();
    world_ranks_ = transport_->world_ranks();
    const char* off = std::getenv("SHARDTRAIN_NO_AGREEMENT_CHECK");
    agreement_check_ = !(off && std::string(off) == "1");
    c.stats.all_reduce_algorithm = halving_all_reduce_ ? "halving" : library_;
    staging_ = std::make_unique<comm_detail::Staging>(c.options.device_memory.get(), transport_->device_memory());
    comm_thread_ = std::thread([this] { run_queue(); });
    watchdog_ = std::thread([this] { run_watchdog(); });
  }

  ~EngineCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(core_->mu);
      core_->stop = true;
      core_->stop_time = Clock::now();
    }
    core_->cv.notify_all();
    if (comm_thread_.joinable()) comm_thread_.join();
    {
      std::lock_guard<std::mutex> lock(watchdog_mu_);
      watchdog_stop_ = true;
    }
    watchdog_cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    retire_flight_recorder(core_->recorder.get());  // no longer a live group of this rank
    // transport_ goes last (declared before the threads' state): abandoned already if work was
    // given up, so its destructor frees only what no pending request references.
  }

  int rank() const override { return core_->rank; }
  int size() const override { return core_->size; }
  int world_rank() const override { return core_->world_rank; }
  int world_size() const override { return core_->world_size; }
  const std::string& name() const override { return core_->name; }
  milliseconds timeout() const override { return core_->options.timeout; }

  std::unique_ptr<Communicator> split(int color, int key, const std::string& name,
                                      std::optional<Phase> phase) override {
    auto work = make_work({CollectiveOp::kSplit, DType::kUInt8, nullptr, nullptr, 0, -1});
    work->split_color = color;
    work->split_key = key;
    enqueue(work);
    work->wait();
    if (!work->split_result) return nullptr;
    CommOptions child = core_->options;
    child.name = name;
    if (phase) child.phase = phase;
    return std::make_unique<EngineCommunicator>(std::move(work->split_result), std::move(child), step_.load(), faults_);
  }

  CollectiveHandle submit(const Request& request) override {
    validate(request);
    Request r = request;
    if (faults_ && faults_->spec.wrong_count &&  // phase only looked up when a wrong-count fault is set
        faults_->spec.wrong_count->selects(core_->world_rank, step_.load(), current_phase_of_group(), core_->name) &&
        r.count > 0 && !faults_->wrong_count_used.exchange(true))
      r.count -= 1;  // this rank disagrees with its peers on the size (fault injection)
    auto work = make_work(r);
    if (faults_ && faults_->spec.skip_selects(core_->world_rank, work->step, work->phase, core_->name))
      work->skip = !faults_->skip_used.exchange(true);  // the first selected only
    enqueue(work);
    return CollectiveHandle(work);
  }

  void set_step(std::int64_t step) override { step_.store(step); }
  std::int64_t step() const override { return step_.load(); }
  void set_fault_injection(const FaultInjection& faults) override {
    faults.validate(core_->world_size);
    faults_ = faults.any() ? std::make_shared<FaultPlan>(faults) : nullptr;
  }

  std::uint64_t next_seq() const override { return next_seq_.load(); }
  CommStats stats() const override {
    std::lock_guard<std::mutex> lock(core_->stats_mu);
    return core_->stats;
  }
  bool failed() const override { return core_->failed.load(); }
  std::shared_ptr<FlightRecorder> recorder() const override { return core_->recorder; }

 private:
  void validate(const Request& r) const {
    const Core& c = *core_;
    if (c.failed.load()) throw CommunicationError(core_->current_failure());
    if (r.count > max_count_)
      throw UsageError(std::string(op_name(r.op)) + " on group " + c.name + ": " + std::to_string(r.count) +
                       " elements exceed the " + library_ + " transport's count limit (" +
                       std::to_string(max_count_) + "); split the buffer");
    if (r.count > 0 && (!r.recv || !r.send))
      throw UsageError(std::string(op_name(r.op)) + " on group " + c.name + ": null buffer");
    if (r.op == CollectiveOp::kAllReduceCanonical) {
      if (!is_power_of_two(c.size))
        throw UsageError("deterministic all-reduce on group " + c.name + " needs a power-of-two group size (1, 2, 4, 8, ...); it has " +
                         std::to_string(c.size) + " ranks");
      if (r.dtype != DType::kFloat32 && r.dtype != DType::kFloat64)
        throw UsageError("deterministic all-reduce takes float32 or float64");
    }
    if (r.op == CollectiveOp::kBroadcast && (r.root < 0 || r.root >= c.size))
      throw UsageError("Broadcast on group " + c.name + ": root " + std::to_string(r.root) + " is not a rank of a " +
                       std::to_string(c.size) + "-rank group");
    if ((r.op == CollectiveOp::kReduceScatter || r.op == CollectiveOp::kAllGather) && r.count > 0) {
      const auto* s = static_cast<const char*>(r.send);
      const auto* d = static_cast<const char*>(r.recv);
      const std::size_t es = dtype_size(r.dtype);
      const std::size_t s_len = r.count * es * (r.op == CollectiveOp::kReduceScatter ? c.size : 1);
      const std::size_t d_len = r.count * es * (r.op == CollectiveOp::kAllGather ? c.size : 1);
      if (s < d + d_len && d < s + s_len)
        throw UsageError(std::string(op_name(r.op)) + " on group " + c.name + ": input and output overlap");
    }
  }

  // The phase stamped on this group's records: its fixed one, else the process-wide one.
  Phase current_phase_of_group() const { return core_->options.phase.value_or(current_phase()); }

  std::shared_ptr<EngineWork> make_work(const Request& r) {
    auto work = std::make_shared<EngineWork>(core_, r, next_seq_.fetch_add(1));
    FlightEntry e;
    e.seq = work->seq();
    e.op = r.op;
    e.group = core_->name;
    e.dtype = r.dtype;
    e.numel = r.count;
    e.bytes = transfer_bytes(r, core_->size);
    e.root = r.root;
    e.step = step_.load();
    e.phase = current_phase_of_group();
    e.part_of = r.part_of;
    work->step = e.step;
    work->phase = e.phase;
    work->record_id = core_->recorder->record(std::move(e));
    return work;
  }

  void enqueue(const std::shared_ptr<EngineWork>& work) {
    {
      std::lock_guard<std::mutex> lock(core_->mu);
      core_->queue.push_back(work);
    }
    core_->cv.notify_all();
    if (core_->failed.load()) work->set_status(Status::kFailed);  // raced with a failure
  }

  // ---- communication thread ----
  // Whether the operation running now must be given up: the communicator failed, or it is being
  // destroyed and the operation had `kDrain` to finish.
  bool should_abandon() {
    static constexpr auto kDrain = std::chrono::seconds(2);
    if (core_->failed.load()) return true;
    std::lock_guard<std::mutex> lock(core_->mu);
    return core_->stop && Clock::now() - core_->stop_time > kDrain;
  }

  // Polls the operation `w` must follow (Request::after) until it completed (true) or this group
  // must give up (false). Spins briefly, then naps 5 us doubling to 50 us: a stage of a pipelined
  // collective starts within tens of microseconds of its input being ready. A failed dependency
  // throws its CommunicationError, which fails this operation as a transport error does.
  bool await_dependency(CollectiveHandle after) {
    auto nap = std::chrono::microseconds(5);
    for (int polls = 0;; ++polls) {
      try {
        if (after.test()) return true;
      } catch (const CommunicationError& e) {
        throw CommunicationError(std::string("the operation it follows failed: ") + e.what());
      }
      if ((polls & 63) == 63 && should_abandon()) return false;
      if (polls < 32) continue;
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(50));
    }
  }

  // Runs one operation; false when abandoned.
  // Buffers on the wrong side of the transport run on staged copies (communicator.hpp, "Device
  // buffers"); the copies back are run_queue's, once the operation completed.
  bool execute(EngineWork& w) {
    dependency_wait_s_ = 0;
    if (w.request().after.valid()) {  // not "in flight" until its input is ready: kept out of busy_s
      const auto waiting_since = Clock::now();
      if (!await_dependency(w.request().after)) return false;
      dependency_wait_s_ = std::chrono::duration<double>(Clock::now() - waiting_since).count();
    }
    // Started only now: a stage waiting for its input stays "queued" in the flight record, so a hang
    // diagnosis finds the first stage some rank never joined, not the ones waiting behind it.
    core_->recorder->mark(w.record_id, FlightState::kStarted);
    if (agreement_check_ && core_->size > 1) {  // every rank agrees on op, dtype, count and root before any data moves
      if (!driver_.exchange_headers(header_of(w.request(), w.seq()), headers_)) return false;
      check_agreement(headers_, core_->rank, world_ranks_);
    }
    const Request r = staging_->stage(w.request(), core_->size);
    Transport& t = *transport_;
    const bool floating = r.dtype == DType::kFloat32 || r.dtype == DType::kFloat64;
    TransportRequest req;
    switch (r.op) {
      case CollectiveOp::kAllReduce:
        if (!halving_all_reduce_ || !floating) {
          req = t.iall_reduce(r.recv, r.count, r.dtype);
          break;
        }
        [[fallthrough]];  // floating-point data on a halving communicator
      case CollectiveOp::kAllReduceCanonical:  // validate() allows float32 and float64 only
        return driver_.halving_doubling(r.recv, r.count, r.dtype, w.seq());
      case CollectiveOp::kReduceScatter:
        // Host buffers: the engine's pairwise exchange (algorithms.hpp says why not the library's).
        if (!t.device_memory() && r.dtype != DType::kUInt8)
          return driver_.pairwise_reduce_scatter(r.send, r.recv, r.count, r.dtype, w.seq());
        req = t.ireduce_scatter(r.send, r.recv, r.count, r.dtype);
        break;
      case CollectiveOp::kAllGather:
        req = t.iall_gather(r.send, r.recv, r.count, r.dtype);
        break;
      case CollectiveOp::kBroadcast:  // control data: the engine's size-checked broadcast
        return driver_.linear_broadcast(r.recv, r.count, r.dtype, r.root, w.seq());
      case CollectiveOp::kBarrier:
        req = t.ibarrier();
        break;
      case CollectiveOp::kSplit:
        // Blocking (Transport::split; MPI has no non-blocking split); the watchdog still reports a
        // hang here, but the thread stays stuck in it.
        w.split_result = t.split(w.split_color, w.split_key);
        return true;
    }
    return driver_.drive(&req, 1);
  }

  void run_queue() {
    for (;;) {
      std::shared_ptr<EngineWork> w;
      {
        std::unique_lock<std::mutex> lock(core_->mu);
        core_->cv.wait(lock, [&] { return core_->stop || core_->failed.load() || !core_->queue.empty(); });
        if (core_->failed.load() || core_->stop) break;
        w = core_->queue.front();
      }
      if (w->skip) {
        core_->recorder->mark(w->record_id, FlightState::kSkipped);
        std::unique_lock<std::mutex> lock(core_->mu);
        core_->cv.wait(lock, [&] { return core_->stop || core_->failed.load(); });
        break;
      }
      const auto t0 = Clock::now();  // execute() marks the record started (after any Request::after)
      const double cpu0 = thread_cpu_seconds();
      bool done = false;
      try {
        done = execute(*w);
        if (done) staging_->unstage();
      } catch (const Disagreement& e) {  // nothing moved: the transport stays usable, but the group fails
        transport_->abandon();
        driver_.abandon_scratch();
        staging_->abandon();
        core_->fail(*w, "agreement", e.what(), e.detail);
        break;
      } catch (const std::exception& e) {  // the transport (or a staging copy) refused it (transport.hpp, "Failure")
        transport_->abandon();
        driver_.abandon_scratch();
        staging_->abandon();
        core_->fail(*w, "transport", e.what());
        break;
      }
      if (!done) {
        transport_->abandon();
        driver_.abandon_scratch();
        staging_->abandon();
        if (!core_->failed.load()) core_->recorder->mark(w->record_id, FlightState::kAborted);
        w->set_status(Status::kFailed);
        break;
      }
      const double busy = std::chrono::duration<double>(Clock::now() - t0).count() - dependency_wait_s_;
      {
        std::lock_guard<std::mutex> lock(core_->stats_mu);
        auto& s = core_->stats.per_op[int(w->request().op)];
        s.calls += 1;
        s.busy_s += busy;
        s.cpu_s += thread_cpu_seconds() - cpu0;
        s.bytes += transfer_bytes(w->request(), core_->size);
        core_->stats.scratch_bytes = driver_.scratch_bytes() + staging_->scratch_bytes();
        for (std::size_t q = 0; q < driver_.peer_stats().size(); ++q) {
          PeerStats& mine = driver_.peer_stats()[q];
          if (mine.bytes == 0) continue;
          PeerStats& p = core_->stats.peers[world_ranks_[q]];
          p.bytes += mine.bytes;
          p.seconds += mine.seconds;
          mine = PeerStats{};
        }
      }
      core_->recorder->mark(w->record_id, FlightState::kCompleted);
      {
        std::lock_guard<std::mutex> lock(core_->mu);
        core_->queue.pop_front();
      }
      w->set_status(Status::kCompleted);
    }
    // Whatever is left never ran: fail it (the records stay "queued", or "skipped").
    std::deque<std::shared_ptr<EngineWork>> rest;
    {
      std::lock_guard<std::mutex> lock(core_->mu);
      rest.swap(core_->queue);
    }
    for (auto& w : rest) w->set_status(Status::kFailed);
  }

  // ---- watchdog thread ----
  void run_watchdog() {
    const auto interval = std::clamp<milliseconds>(core_->options.timeout / 10, milliseconds(10), milliseconds(1000));
    std::unique_lock<std::mutex> lock(watchdog_mu_);
    while (!watchdog_stop_) {
      // Wake at the next check, or exactly when the operation at the head of the queue is due.
      auto wake = Clock::now() + interval;
      {
        std::lock_guard<std::mutex> ql(core_->mu);
        if (!core_->queue.empty() && !core_->failed.load())
          wake = std::min(wake, core_->queue.front()->enqueued() + core_->options.timeout + milliseconds(1));
      }
      watchdog_cv_.wait_until(lock, wake);
      if (watchdog_stop_) break;
      if (core_->failed.load()) {
        FatalHook hook;
        std::string message;
        {
          std::lock_guard<std::mutex> fl(core_->fail_mu);
          if (!core_->fatal_called && core_->options.on_fatal &&
              Clock::now() - core_->fail_time >= core_->options.teardown_grace) {
            core_->fatal_called = true;
            hook = core_->options.on_fatal;
            message = core_->failure_message;
          }
        }
        if (hook) {
          lock.unlock();
          hook(CommunicationError(message));
          lock.lock();
        }
        continue;
      }
      std::shared_ptr<EngineWork> head;
      {
        std::lock_guard<std::mutex> ql(core_->mu);
        if (!core_->queue.empty()) head = core_->queue.front();
      }
      if (head && Clock::now() - head->enqueued() > core_->options.timeout) {
        lock.unlock();
        core_->fail_timeout(*head, "watchdog");
        lock.lock();
      }
    }
  }

  std::shared_ptr<Core> core_;
  std::unique_ptr<Transport> transport_;  // used by the communication thread only (after construction)
  comm_detail::Driver driver_;            // idem
  std::unique_ptr<comm_detail::Staging> staging_;  // idem (made once the options are known)
  std::string library_;                   // transport_->library_name(), for the submitting thread
  std::size_t max_count_ = 0;             // transport_->max_count(), idem
  std::vector<int> world_ranks_;          // transport_->world_ranks(), for the communication thread
  std::vector<OpHeader> headers_;         // the last header exchange (communication thread)
  // The header exchange before every operation (transport.hpp, "Agreement"); off only to measure its
  // cost: SHARDTRAIN_NO_AGREEMENT_CHECK=1 in the environment (then ranks that disagree reach the
  // library unchecked, as before).
  bool agreement_check_ = true;
  bool halving_all_reduce_ = false;       // all_reduce on float data runs halving/doubling (CommOptions::all_reduce)
  double dependency_wait_s_ = 0;          // the running operation's wait for Request::after (communication thread)
  std::atomic<std::uint64_t> next_seq_{1};
  std::atomic<std::int64_t> step_;
  std::shared_ptr<FaultPlan> faults_;  // null: no injection (the default)
  std::thread comm_thread_, watchdog_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_communicator(std::unique_ptr<Transport> transport, CommOptions options) {
  if (!transport) throw UsageError("make_communicator: no transport");
  return std::make_unique<EngineCommunicator>(std::move(transport), std::move(options), -1, nullptr);
}

}  // namespace shardtrain
