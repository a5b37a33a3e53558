// MPI communicator: a queue of operations run in order on one communication thread per
// communicator, non-blocking MPI driven by MPI_Test, a watchdog thread for timeouts. See comm.hpp
// and comm_mpi.hpp for the contracts.
#include "shardtrain/comm/mpi.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <ctime>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "shardtrain/base/log.hpp"

namespace shardtrain {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kUInt64: return MPI_UINT64_T;
    case DType::kUInt8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Bytes an operation moves, as comm_types.hpp counts them: its elements, times the group size for
// reduce-scatter (the input) and all-gather (the output).
std::uint64_t transfer_bytes(const Communicator::Request& r, int group_size) {
  const std::uint64_t bytes = r.count * dtype_size(r.dtype);
  const bool per_rank_block = r.op == CollectiveOp::kReduceScatter || r.op == CollectiveOp::kAllGather;
  return per_rank_block ? bytes * std::uint64_t(group_size) : bytes;
}

// CPU time consumed so far by the calling thread.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

enum class Status { kQueued, kStarted, kCompleted, kFailed };

struct Core;

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<Core> core, const Communicator::Request& req, std::uint64_t seq)
      : core_(std::move(core)), req_(req), seq_(seq), enqueued_(Clock::now()) {}

  bool test() override;
  void wait(milliseconds timeout) override;
  void wait() override;
  std::uint64_t seq() const override { return seq_; }
  CollectiveOp op() const override { return req_.op; }

  const Communicator::Request& request() const { return req_; }
  Clock::time_point enqueued() const { return enqueued_; }

  // Set by the communicator before the work is queued.
  std::uint64_t record_id = 0;
  bool skip = false;             // fault injection: never issue
  int split_color = 0, split_key = 0;
  MPI_Comm split_result = MPI_COMM_NULL;

  void set_status(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_ == Status::kCompleted || status_ == Status::kFailed) return;
      status_ = s;
    }
    cv_.notify_all();
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  void wait_until(Clock::time_point deadline);

  std::shared_ptr<Core> core_;
  Communicator::Request req_;
  std::uint64_t seq_;
  Clock::time_point enqueued_;
  std::mutex mu_;
  std::condition_variable cv_;
  Status status_ = Status::kQueued;
};

// State shared by the communicator object, its two threads and the handles it gave out (a handle
// may outlive its communicator).
struct Core {
  // Identity.
  std::string name;
  int rank = 0, size = 1, world_rank = 0, world_size = 1;
  CommOptions options;
  std::shared_ptr<FlightRecorder> recorder;
  MPI_Comm comm = MPI_COMM_NULL;
  int tag_span = 1;  // distinct sequence numbers in halving/doubling tags
  bool halving_all_reduce = false;  // all_reduce on float data runs halving_doubling (CommOptions::all_reduce)
  std::atomic<int> waiters{0};  // callers blocked in wait(): the communication thread then yields instead of napping

  // Queue, guarded by mu. The head is the operation running (or next to run).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<MpiWork>> queue;
  bool stop = false;
  Clock::time_point stop_time;

  // Failure, guarded by fail_mu; `failed` readable without it.
  std::mutex fail_mu;
  std::atomic<bool> failed{false};
  std::string failure_message;
  Clock::time_point fail_time;
  bool fatal_called = false;
  bool comm_leaked = false;  // an abandoned MPI request still references `comm`

  // Accounting.
  mutable std::mutex stats_mu;
  CommStats stats;

  std::string dump_path() const {
    return (options.run_dir.empty() ? std::string(".") : options.run_dir) + "/flight.rank" +
           std::to_string(world_rank) + ".json";
  }

  void emit_line(const std::string& message) const {
    const std::string line =
        "[rank " + std::to_string(world_rank) + "/" + std::to_string(world_size) + "] " + message + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }

  std::string describe(const MpiWork& w) const {
    const auto& r = w.request();
    std::ostringstream s;
    s << op_name(r.op) << "(seq=" << w.seq() << ", group=" << name << ", numel=" << r.count
      << ", bytes=" << transfer_bytes(r, size) << ", timeout_ms=" << options.timeout.count() << ")";
    return s.str();
  }

  // The one failure path: the first late operation dumps, prints, and fails the communicator.
  // Returns the failure message (the first one, whoever detected it).
  std::string fail_timeout(MpiWork& w, const char* detected_by) {
    std::lock_guard<std::mutex> lock(fail_mu);
    if (failed.load()) return failure_message;
    const double elapsed = std::chrono::duration<double>(Clock::now() - w.enqueued()).count();
    if (!w.skip) recorder->mark(w.record_id, FlightState::kTimedOut);
    const std::string path = dump_path();
    std::string message = "collective timeout: " + describe(w) + " after " + format_seconds(elapsed) + " s";
    if (w.skip) message += " (this rank skipped it: fault injection)";
    nlohmann::json trigger = {{"group", name},          {"seq", w.seq()},
                              {"op", op_name(w.request().op)}, {"elapsed_s", elapsed},
                              {"timeout_ms", options.timeout.count()}, {"detected_by", detected_by},
                              {"skipped_by_fault_injection", w.skip}};
    try {
      recorder->dump(path, world_rank, world_size, "timeout", trigger);
      message += "; flight record: " + path;
    } catch (const std::exception& e) {
      message += "; flight record NOT written: " + std::string(e.what());
    }
    emit_line(message);
    failure_message = message;
    fail_time = Clock::now();
    failed.store(true);
    // Wake the communication thread and every waiter.
    std::vector<std::shared_ptr<MpiWork>> pending;
    {
      std::lock_guard<std::mutex> qlock(mu);
      pending.assign(queue.begin(), queue.end());
    }
    cv.notify_all();
    for (auto& p : pending) p->set_status(Status::kFailed);
    return message;
  }

  std::string current_failure() {
    std::lock_guard<std::mutex> lock(fail_mu);
    return failed.load() ? failure_message
                         : "communicator '" + name + "' was destroyed before this operation completed";
  }

  // Sleeps until `teardown_grace` has passed since the failure (see comm.hpp, "Timeouts").
  void teardown_pause() {
    Clock::time_point until;
    {
      std::lock_guard<std::mutex> lock(fail_mu);
      if (!failed.load()) return;
      until = fail_time + options.teardown_grace;
    }
    std::this_thread::sleep_until(until);
  }

  void add_wait(double seconds) {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.wait_s += seconds;
  }
};

bool MpiWork::test() {
  std::unique_lock<std::mutex> lock(mu_);
  if (status_ == Status::kCompleted) return true;
  if (status_ == Status::kFailed) {
    lock.unlock();
    throw CommunicationError(core_->current_failure());
  }
  lock.unlock();
  if (Clock::now() - enqueued_ > core_->options.timeout) throw CommunicationError(core_->fail_timeout(*this, "test"));
  return false;
}

void MpiWork::wait_until(Clock::time_point deadline) {
  const auto t0 = Clock::now();
  struct Waiting {  // counted for the communication thread's polling (Core::waiters)
    std::atomic<int>& n;
    explicit Waiting(std::atomic<int>& c) : n(c) { n.fetch_add(1); }
    ~Waiting() { n.fetch_sub(1); }
  } waiting(core_->waiters);
  std::unique_lock<std::mutex> lock(mu_);
  while (status_ != Status::kCompleted && status_ != Status::kFailed) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && status_ != Status::kCompleted &&
        status_ != Status::kFailed) {
      lock.unlock();
      const std::string message = core_->fail_timeout(*this, "wait");
      core_->teardown_pause();
      core_->add_wait(std::chrono::duration<double>(Clock::now() - t0).count());
      throw CommunicationError(message);
    }
  }
  const bool ok = status_ == Status::kCompleted;
  lock.unlock();
  if (!ok) core_->teardown_pause();
  core_->add_wait(std::chrono::duration<double>(Clock::now() - t0).count());
  if (!ok) throw CommunicationError(core_->current_failure());
}

void MpiWork::wait(milliseconds timeout) {
  const auto by_collective = enqueued_ + core_->options.timeout;
  const auto now = Clock::now();
  // Avoid overflow for huge `timeout`.
  const auto by_caller = timeout >= core_->options.timeout ? by_collective : now + timeout;
  wait_until(std::min(by_caller, by_collective));
}

void MpiWork::wait() { wait_until(enqueued_ + core_->options.timeout); }

// ---------------------------------------------------------------------------------------------

class MpiCommunicator final : public Communicator {
 public:
  // Adopts `comm` (already private to this communicator).
  MpiCommunicator(MPI_Comm comm, CommOptions options, std::shared_ptr<FlightRecorder> recorder)
      : core_(std::make_shared<Core>()) {
    Core& c = *core_;
    c.comm = comm;
    c.options = std::move(options);
    if (c.options.timeout.count() <= 0) throw UsageError("collective timeout must be positive");
    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.size);
    const AllReduceAlgorithm algorithm = c.options.all_reduce;
    if (algorithm == AllReduceAlgorithm::kHalvingDoubling && !is_power_of_two(c.size)) {
      MPI_Comm_free(&c.comm);  // every rank of this group refuses alike
      throw UsageError("--allreduce halving needs a power-of-two number of ranks in group '" + c.options.name +
                       "' (it has " + std::to_string(c.size) + "); use --allreduce auto or mpi");
    }
    c.halving_all_reduce = algorithm == AllReduceAlgorithm::kHalvingDoubling ||
                           (algorithm == AllReduceAlgorithm::kAuto && is_power_of_two(c.size) && c.size > 1);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.world_size);
    // World rank of every group rank.
    MPI_Group group, world;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> local(c.size), global(c.size);
    for (int i = 0; i < c.size; ++i) local[i] = i;
    MPI_Group_translate_ranks(group, c.size, local.data(), world, global.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    int* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &found);
    c.tag_span = std::max(1, (found && tag_ub ? *tag_ub : 32767) / 64 - 1);
    c.recorder = recorder ? std::move(recorder) : std::make_shared<FlightRecorder>(c.options.recorder_capacity);
    c.name = c.recorder->register_group(c.options.name, c.rank, c.size, std::move(global));
    c.stats.group_size = c.size;
    comm_thread_ = std::thread([this] { run_queue(); });
    watchdog_ = std::thread([this] { run_watchdog(); });
  }

  ~MpiCommunicator() override {
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
    bool leaked;
    {
      std::lock_guard<std::mutex> lock(core_->fail_mu);
      leaked = core_->comm_leaked;
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!leaked && !finalized) MPI_Comm_free(&core_->comm);
  }

  int rank() const override { return core_->rank; }
  int size() const override { return core_->size; }
  int world_rank() const override { return core_->world_rank; }
  int world_size() const override { return core_->world_size; }
  const std::string& name() const override { return core_->name; }
  milliseconds timeout() const override { return core_->options.timeout; }

  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override {
    auto work = make_work({CollectiveOp::kSplit, DType::kUInt8, nullptr, nullptr, 0, -1});
    work->split_color = color;
    work->split_key = key;
    enqueue(work);
    work->wait();
    if (work->split_result == MPI_COMM_NULL) return nullptr;
    CommOptions child = core_->options;
    child.name = name;
    return std::make_unique<MpiCommunicator>(work->split_result, child, core_->recorder);
  }

  CollectiveHandle submit(const Request& r) override {
    validate(r);
    auto work = make_work(r);
    if (faults_.skip && faults_.skip->rank == core_->world_rank && faults_.skip->step == step_.load() &&
        skipped_step_ != step_.load()) {
      work->skip = true;
      skipped_step_ = step_.load();
    }
    enqueue(work);
    return CollectiveHandle(work);
  }

  void set_step(std::int64_t step) override { step_.store(step); }
  std::int64_t step() const override { return step_.load(); }
  void set_fault_injection(const FaultInjection& faults) override {
    faults.validate(core_->world_size);
    faults_ = faults;
  }
  void maybe_delay() override {
    const auto ms = faults_.delay_ms_for(core_->world_rank);
    if (ms > 0) std::this_thread::sleep_for(milliseconds(ms));
  }

  std::uint64_t next_seq() const override { return next_seq_.load(); }
  CommStats stats() const override {
    std::lock_guard<std::mutex> lock(core_->stats_mu);
    CommStats s = core_->stats;
    s.all_reduce_algorithm = core_->halving_all_reduce ? "halving" : "mpi";
    return s;
  }
  bool failed() const override { return core_->failed.load(); }
  std::shared_ptr<FlightRecorder> recorder() const override { return core_->recorder; }
  std::string dump_flight_record(const std::string& reason) override {
    const std::string path = core_->dump_path();
    core_->recorder->dump(path, core_->world_rank, core_->world_size, reason, nullptr);
    return path;
  }

 private:
  void validate(const Request& r) const {
    const Core& c = *core_;
    if (c.failed.load()) throw CommunicationError(core_->current_failure());
    if (r.count > std::size_t(INT_MAX))
      throw UsageError(std::string(op_name(r.op)) + " on group " + c.name + ": " + std::to_string(r.count) +
                       " elements exceed the MPI count limit (" + std::to_string(INT_MAX) + "); split the buffer");
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

  std::shared_ptr<MpiWork> make_work(const Request& r) {
    auto work = std::make_shared<MpiWork>(core_, r, next_seq_.fetch_add(1));
    FlightEntry e;
    e.seq = work->seq();
    e.op = r.op;
    e.group = core_->name;
    e.dtype = r.dtype;
    e.numel = r.count;
    e.bytes = transfer_bytes(r, core_->size);
    e.root = r.root;
    e.step = step_.load();
    work->record_id = core_->recorder->record(e);
    return work;
  }

  void enqueue(const std::shared_ptr<MpiWork>& work) {
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

  // Drives requests to completion with MPI_Testall; false when abandoned. While the compute thread
  // computes, after a short spin the thread sleeps between tests (backing off to kMaxPollSleep): a
  // rank's communication thread shares its core with the compute thread, and yield-spinning there
  // took ~6% of a training step at W = 2 (measured with scripts/bench-ddp.sh); a test every
  // <= 100 us still drives Open MPI's non-blocking collectives well within a bucket's time. While a
  // caller is blocked in wait(), its compute thread needs no core, so the thread only yields
  // between tests (every nap there would be exposed communication time); yielding rather than
  // spinning leaves the core to other ranks when ranks are oversubscribed.
  bool progress(MPI_Request* reqs, int n) {
    static constexpr auto kMaxPollSleep = std::chrono::microseconds(100);
    int spins = 0;
    auto nap = std::chrono::microseconds(5);
    for (;;) {
      int flag = 0;
      MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
      if (flag) return true;
      if ((spins & 255) == 255 && should_abandon()) return false;
      if (++spins <= 32) continue;
      if (core_->waiters.load(std::memory_order_relaxed) > 0) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, kMaxPollSleep);
      }
    }
  }

  // Recursive halving then doubling over point-to-point messages, in place; false when abandoned.
  // The canonical all-reduce (comm.hpp: lower + upper at every level, so bitwise the same on every
  // rank and for any grouping of a power-of-two tree) and, with --allreduce auto/halving, the fast
  // one.
  template <typename T>
  bool halving_doubling(T* data, std::size_t n, std::uint64_t seq) {
    const Core& c = *core_;
    const int W = c.size, r = c.rank;
    if (W == 1) return true;
    const MPI_Datatype type = mpi_type(dtype_of<T>());
    const int tag_base = 64 * int(seq % std::uint64_t(c.tag_span));
    if (scratch_.size() < (n / 2 + 1) * sizeof(T)) scratch_.resize((n / 2 + 1) * sizeof(T));
    T* tmp = reinterpret_cast<T*>(scratch_.data());
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
      MPI_Request reqs[2];
      MPI_Irecv(tmp, int(keep_hi - keep_lo), type, partner, tag_base + round, c.comm, &reqs[0]);
      MPI_Isend(data + send_lo, int(send_hi - send_lo), type, partner, tag_base + round, c.comm, &reqs[1]);
      if (!progress(reqs, 2)) return false;
      T* mine = data + keep_lo;
      const std::size_t m = keep_hi - keep_lo;
      if (lower)
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
      MPI_Request reqs[2];
      MPI_Irecv(data + other_lo, int(other_hi - other_lo), type, partner, tag_base + round, c.comm, &reqs[0]);
      MPI_Isend(data + lo, int(hi - lo), type, partner, tag_base + round, c.comm, &reqs[1]);
      if (!progress(reqs, 2)) return false;
      lo = plo;
      hi = phi;
    }
    return true;
  }

  // Runs one operation; false when abandoned.
  bool execute(MpiWork& w) {
    const Request& r = w.request();
    const Core& c = *core_;
    const MPI_Datatype type = mpi_type(r.dtype);
    const int n = int(r.count);
    MPI_Request req = MPI_REQUEST_NULL;
    switch (r.op) {
      case CollectiveOp::kAllReduce:
        if (!c.halving_all_reduce || (r.dtype != DType::kFloat32 && r.dtype != DType::kFloat64)) {
          MPI_Iallreduce(MPI_IN_PLACE, r.recv, n, type, MPI_SUM, c.comm, &req);
          break;
        }
        [[fallthrough]];  // floating-point data on a halving communicator
      case CollectiveOp::kAllReduceCanonical:  // validate() allows float32 and float64 only
        return r.dtype == DType::kFloat32 ? halving_doubling(static_cast<float*>(r.recv), r.count, w.seq())
                                          : halving_doubling(static_cast<double*>(r.recv), r.count, w.seq());
      case CollectiveOp::kReduceScatter:
        MPI_Ireduce_scatter_block(r.send, r.recv, n, type, MPI_SUM, c.comm, &req);
        break;
      case CollectiveOp::kAllGather:
        MPI_Iallgather(r.send, n, type, r.recv, n, type, c.comm, &req);
        break;
      case CollectiveOp::kBroadcast:
        MPI_Ibcast(r.recv, n, type, r.root, c.comm, &req);
        break;
      case CollectiveOp::kBarrier:
        MPI_Ibarrier(c.comm, &req);
        break;
      case CollectiveOp::kSplit:
        // Blocking (MPI has no non-blocking split); the watchdog still reports a hang here.
        MPI_Comm_split(c.comm, w.split_color < 0 ? MPI_UNDEFINED : w.split_color, w.split_key, &w.split_result);
        return true;
    }
    return progress(&req, 1);
  }

  void run_queue() {
    for (;;) {
      std::shared_ptr<MpiWork> w;
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
      core_->recorder->mark(w->record_id, FlightState::kStarted);
      w->set_status(Status::kStarted);
      const auto t0 = Clock::now();
      const double cpu0 = thread_cpu_seconds();
      const bool done = execute(*w);
      if (!done) {
        {
          std::lock_guard<std::mutex> lock(core_->fail_mu);
          core_->comm_leaked = true;
        }
        if (!core_->failed.load()) core_->recorder->mark(w->record_id, FlightState::kAborted);
        w->set_status(Status::kFailed);
        break;
      }
      const double busy = std::chrono::duration<double>(Clock::now() - t0).count();
      {
        std::lock_guard<std::mutex> lock(core_->stats_mu);
        auto& s = core_->stats.per_op[int(w->request().op)];
        s.calls += 1;
        s.busy_s += busy;
        s.cpu_s += thread_cpu_seconds() - cpu0;
        s.bytes += transfer_bytes(w->request(), core_->size);
      }
      core_->recorder->mark(w->record_id, FlightState::kCompleted);
      {
        std::lock_guard<std::mutex> lock(core_->mu);
        core_->queue.pop_front();
      }
      w->set_status(Status::kCompleted);
    }
    // Whatever is left never ran: fail it (the records stay "queued", or "skipped").
    std::deque<std::shared_ptr<MpiWork>> rest;
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
      std::shared_ptr<MpiWork> head;
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
  std::atomic<std::uint64_t> next_seq_{1};
  std::atomic<std::int64_t> step_{-1};
  FaultInjection faults_;
  std::int64_t skipped_step_ = -1;
  std::vector<unsigned char> scratch_;  // halving_doubling's receive buffer (communication thread only; kept
                                       // between calls so large reductions do not allocate and fault in pages each time)
  std::thread comm_thread_, watchdog_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
};

}  // namespace

std::uint64_t CommStats::total_bytes() const {
  std::uint64_t b = 0;
  for (const auto& s : per_op) b += s.bytes;
  return b;
}

double CommStats::total_busy_s() const {
  double t = 0;
  for (const auto& s : per_op) t += s.busy_s;
  return t;
}

double CommStats::total_cpu_s() const {
  double t = 0;
  for (const auto& s : per_op) t += s.cpu_s;
  return t;
}

nlohmann::json CommStats::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    const auto& s = per_op[i];
    if (s.calls == 0) continue;
    const auto op = static_cast<CollectiveOp>(i);
    const double algbw = s.busy_s > 0 ? double(s.bytes) / s.busy_s : 0.0;
    j[op_name(op)] = {{"calls", s.calls},
                      {"bytes", s.bytes},
                      {"busy_s", s.busy_s},
                      {"cpu_s", s.cpu_s},
                      {"algbw_GBps", algbw * 1e-9},
                      {"busbw_GBps", bus_bandwidth(op, s.bytes, s.busy_s, group_size) * 1e-9}};
  }
  j["group_size"] = group_size;
  j["total_bytes"] = total_bytes();
  j["total_busy_s"] = total_busy_s();
  j["total_cpu_s"] = total_cpu_s();
  j["wait_s"] = wait_s;
  j["allreduce_algorithm"] = all_reduce_algorithm;
  return j;
}

AllReduceAlgorithm parse_all_reduce_algorithm(const std::string& text) {
  if (text == "auto") return AllReduceAlgorithm::kAuto;
  if (text == "halving") return AllReduceAlgorithm::kHalvingDoubling;
  if (text == "mpi") return AllReduceAlgorithm::kLibrary;
  throw UsageError("--allreduce '" + text + "' is not one of auto, halving, mpi");
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm base, CommOptions options) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw UsageError("MPI communicator: MPI is not initialised (call MPI_Init_thread with MPI_THREAD_MULTIPLE first)");
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    const char* names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"};
    const char* got = provided >= 0 && provided <= 3 ? names[provided] : "unknown";
    throw UsageError(std::string("MPI communicator needs MPI_THREAD_MULTIPLE (a communication thread and a watchdog "
                                 "per communicator); this MPI library provided ") +
                     got + ": use an MPI built with thread support (Open MPI: --enable-mpi-thread-multiple)");
  }
  MPI_Comm comm = MPI_COMM_NULL;
  if (MPI_Comm_dup(base, &comm) != MPI_SUCCESS) throw CommunicationError("MPI_Comm_dup failed");
  return std::make_unique<MpiCommunicator>(comm, std::move(options), nullptr);
}

FatalHook mpi_abort_on_fatal() {
  return [](const CommunicationError&) { MPI_Abort(MPI_COMM_WORLD, static_cast<int>(ExitCode::kCommunication)); };
}

}  // namespace shardtrain
