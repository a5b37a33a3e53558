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
#include "staging.hpp"
#include "shardtrain/comm/transport.hpp"

namespace shardtrain {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Bytes an operation moves, as types.hpp counts them: its elements, times the group size for
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

// Ranks that disagree on an operation (the header exchange, algorithms.hpp): the message, and the
// table of every rank's header for the flight record's trigger ("agreement", FORMATS.md).
class Disagreement : public CommunicationError {
 public:
  Disagreement(const std::string& what, nlohmann::json detail) : CommunicationError(what), detail(std::move(detail)) {}
  nlohmann::json detail;
};

using OpHeader = comm_detail::Driver::OpHeader;

OpHeader header_of(const Communicator::Request& r, std::uint64_t seq) {
  return {seq, std::uint64_t(r.op), std::uint64_t(r.dtype), std::uint64_t(r.count), std::int64_t(r.root)};
}

// "AllReduce seq 12 of 99 float32 elements" (root and unknown codes as such).
std::string header_text(const OpHeader& h) {
  std::string op = h.op < std::uint64_t(kNumCollectiveOps) ? op_name(CollectiveOp(int(h.op))) : "op#" + std::to_string(h.op);
  std::string dtype = h.dtype <= std::uint64_t(DType::kUInt8) ? dtype_name(DType(int(h.dtype))) : "dtype#" + std::to_string(h.dtype);
  std::string text = op + " seq " + std::to_string(h.seq) + " of " + std::to_string(h.count) + " " + dtype + " elements";
  if (h.root >= 0) text += " (root " + std::to_string(h.root) + ")";
  return text;
}

// Throws Disagreement when the headers of `all` (by group rank) are not all equal. The ranks that
// hold the strict majority's header name the others as the source of input they cannot trust
// ("untrusted input from world rank R"); a rank outside the majority says its own header is the odd
// one; without a majority every rank lists every header.
void check_agreement(const std::vector<OpHeader>& all, int me, const std::vector<int>& world_ranks) {
  if (std::all_of(all.begin(), all.end(), [&](const OpHeader& h) { return h == all[0]; })) return;
  const int W = int(all.size());
  int majority = -1;  // a group rank holding the strict majority's header
  for (int q = 0; q < W && majority < 0; ++q)
    if (2 * std::count(all.begin(), all.end(), all[std::size_t(q)]) > W) majority = q;
  nlohmann::json headers = nlohmann::json::array();
  std::vector<int> odd;  // world ranks outside the majority (all, without one)
  for (int q = 0; q < W; ++q) {
    const OpHeader& h = all[std::size_t(q)];
    headers.push_back({{"group_rank", q}, {"world_rank", world_ranks[std::size_t(q)]},
                       {"seq", h.seq}, {"op", h.op < std::uint64_t(kNumCollectiveOps) ? op_name(CollectiveOp(int(h.op))) : "?"},
                       {"dtype", h.dtype <= std::uint64_t(DType::kUInt8) ? dtype_name(DType(int(h.dtype))) : "?"},
                       {"numel", h.count}, {"root", h.root}});
    if (majority < 0 || !(h == all[std::size_t(majority)])) odd.push_back(world_ranks[std::size_t(q)]);
  }
  std::string list;
  for (int w : odd) list += (list.empty() ? "" : ", ") + std::to_string(w);
  nlohmann::json detail = {{"headers", headers}, {"majority", majority >= 0}, {"disagreeing_world_ranks", odd}};
  std::string message;
  if (majority < 0) {
    message = "the ranks disagree on this collective and no header has a majority:";
    for (int q = 0; q < W; ++q)
      message += std::string(q ? ";" : "") + " world rank " + std::to_string(world_ranks[std::size_t(q)]) + " " +
                 header_text(all[std::size_t(q)]);
  } else if (all[std::size_t(me)] == all[std::size_t(majority)]) {
    detail["untrusted_input_from"] = odd;
    message = "untrusted input from world rank(s) " + list + ": ";
    for (std::size_t i = 0; i < odd.size(); ++i) {
      const auto q = std::size_t(std::find(world_ranks.begin(), world_ranks.end(), odd[i]) - world_ranks.begin());
      message += std::string(i ? "; " : "") + "world rank " + std::to_string(odd[i]) + " has " + header_text(all[q]);
    }
    message += ", this rank and the majority " + header_text(all[std::size_t(majority)]);
  } else {
    message = "this rank's " + header_text(all[std::size_t(me)]) + " disagrees with the majority's " +
              header_text(all[std::size_t(majority)]);
  }
  throw Disagreement(message + " (checked before any data moved)", std::move(detail));
}

enum class Status { kPending, kCompleted, kFailed };  // pending: queued or in flight

// The fault injection of a communicator, shared with the groups split from it afterwards, so that
// a skip-collective skips one collective among all of them.
struct FaultPlan {
  explicit FaultPlan(FaultInjection f) : spec(std::move(f)) {}
  const FaultInjection spec;
  std::atomic<bool> skip_used{false};
  std::atomic<bool> wrong_count_used{false};
};

struct Core;

class EngineWork final : public Work {
 public:
  EngineWork(std::shared_ptr<Core> core, const Communicator::Request& req, std::uint64_t seq)
      : core_(std::move(core)), req_(req), seq_(seq), enqueued_(Clock::now()) {}

  bool test() override;
  void wait(milliseconds timeout) override;
  void wait() override;
  std::uint64_t seq() const override { return seq_; }

  const Communicator::Request& request() const { return req_; }
  Clock::time_point enqueued() const { return enqueued_; }

  // Set by the communicator before the work is queued.
  std::int64_t step = -1;       // as recorded at submission
  Phase phase = Phase::kSetup;  // idem
  std::uint64_t record_id = 0;  // its ticket in the group's recorder
  bool skip = false;  // fault injection: never issue
  int split_color = 0, split_key = 0;
  std::unique_ptr<Transport> split_result;  // kSplit: the child's transport (null: no group)

  // Settles the work once (completed or failed) and wakes its waiters.
  void set_status(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_ != Status::kPending) return;
      status_ = s;
    }
    cv_.notify_all();
  }

 private:
  void wait_until(Clock::time_point deadline);

  std::shared_ptr<Core> core_;
  Communicator::Request req_;
  std::uint64_t seq_;
  Clock::time_point enqueued_;
  std::mutex mu_;
  std::condition_variable cv_;
  Status status_ = Status::kPending;
};

// State shared by the communicator object, its two threads and the handles it gave out (a handle
// may outlive its communicator).
struct Core {
  // Identity.
  std::string name;
  int rank = 0, size = 1, world_rank = 0, world_size = 1;
  CommOptions options;
  std::shared_ptr<FlightRecorder> recorder;
  std::atomic<int> waiters{0};  // callers blocked in wait(): the communication thread then yields instead of napping

  // Queue, guarded by mu. The head is the operation running (or next to run).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<EngineWork>> queue;
  bool stop = false;
  Clock::time_point stop_time;

  // Failure, guarded by fail_mu; `failed` readable without it.
  std::mutex fail_mu;
  std::atomic<bool> failed{false};
  std::string failure_message;
  Clock::time_point fail_time;
  bool fatal_called = false;

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

  std::string describe(const EngineWork& w) const {
    const auto& r = w.request();
    std::ostringstream s;
    s << op_name(r.op) << "(seq=" << w.seq() << ", group=" << name << ", numel=" << r.count
      << ", bytes=" << transfer_bytes(r, size) << ", timeout_ms=" << options.timeout.count() << ")";
    return s.str();
  }

  // A late operation: see fail().
  std::string fail_timeout(EngineWork& w, const char* detected_by) { return fail(w, detected_by, ""); }

  // The one failure path: the first late operation (`error` empty) or the first operation the
  // transport refused (`error`: the transport's message) dumps, prints, and fails the communicator,
  // so waiters throw and on_fatal ends the job as for a timeout. Returns the failure message (the
  // first one, whoever detected it).
  // `agreement`: the header table when the ranks disagreed on the operation (check_agreement).
  std::string fail(EngineWork& w, const char* detected_by, const std::string& error,
                   const nlohmann::json& agreement = nullptr) {
    std::lock_guard<std::mutex> lock(fail_mu);
    if (failed.load()) return failure_message;
    const double elapsed = std::chrono::duration<double>(Clock::now() - w.enqueued()).count();
    if (!w.skip) recorder->mark(w.record_id, error.empty() ? FlightState::kTimedOut : FlightState::kAborted);
    const std::string path = dump_path();
    std::string message = error.empty()
                              ? "collective timeout: " + describe(w) + " after " + format_seconds(elapsed) + " s"
                              : "collective failed: " + describe(w) + ": " + error;
    if (w.skip) message += " (this rank skipped it: fault injection)";
    nlohmann::json trigger = {{"group", name},
                                    {"seq", w.seq()},
                                    {"op", op_name(w.request().op)},
                                    {"step", w.step},
                                    {"phase", phase_name(w.phase)},
                                    {"elapsed_s", elapsed},
                                    {"timeout_ms", options.timeout.count()},
                                    {"detected_by", detected_by},
                                    {"skipped_by_fault_injection", w.skip}};
    if (!error.empty()) trigger["error"] = error;
    if (!agreement.is_null()) trigger["agreement"] = agreement;
    try {
      write_flight_record(path, world_rank, world_size, error.empty() ? "timeout" : "error", trigger);
      message += "; flight record: " + path;
    } catch (const std::exception& e) {
      message += "; flight record NOT written: " + std::string(e.what());
    }
    emit_line(message);
    failure_message = message;
    fail_time = Clock::now();
    failed.store(true);
    // Wake the communication thread and every waiter.
    std::vector<std::shared_ptr<EngineWork>> pending;
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

  // Sleeps until `teardown_grace` has passed since the failure (see communicator.hpp, "Timeouts").
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

bool EngineWork::test() {
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

void EngineWork::wait_until(Clock::time_point deadline) {
  const auto t0 = Clock::now();
  struct Waiting {  // counted for the communication thread's polling (Core::waiters)
    std::atomic<int>& n;
    explicit Waiting(std::atomic<int>& c) : n(c) { n.fetch_add(1); }
    ~Waiting() { n.fetch_sub(1); }
  } waiting(core_->waiters);
  std::unique_lock<std::mutex> lock(mu_);
  while (status_ == Status::kPending) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && status_ == Status::kPending) {
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

void EngineWork::wait(milliseconds timeout) {
  const auto by_collective = enqueued_ + core_->options.timeout;
  const auto now = Clock::now();
  // Avoid overflow for huge `timeout`.
  const auto by_caller = timeout >= core_->options.timeout ? by_collective : now + timeout;
  wait_until(std::min(by_caller, by_collective));
}

void EngineWork::wait() { wait_until(enqueued_ + core_->options.timeout); }

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
