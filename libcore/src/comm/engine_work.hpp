// The comm engine's operations and shared state (engine.cpp): one queued operation (EngineWork,
// the Work behind a CollectiveHandle) and the state the communicator, its communication and
// watchdog threads and the handles it gave out share (Core; a handle may outlive its
// communicator), with the engine's one failure path (Core::fail: flight record, the line on
// stderr, every waiter woken failed).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/comm/flight_recorder.hpp"
#include "shardtrain/comm/transport.hpp"

namespace shardtrain::comm_detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

enum class Status { kPending, kCompleted, kFailed };  // pending: queued or in flight

// Bytes an operation moves, as types.hpp counts them: its elements, times the group size for
// reduce-scatter (the input) and all-gather (the output).
inline std::uint64_t transfer_bytes(const Communicator::Request& r, int group_size) {
  const std::uint64_t bytes = r.count * dtype_size(r.dtype);
  const bool per_rank_block = r.op == CollectiveOp::kReduceScatter || r.op == CollectiveOp::kAllGather;
  return per_rank_block ? bytes * std::uint64_t(group_size) : bytes;
}

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

  std::string describe(const EngineWork& w) const;

  // A late operation: see fail().
  std::string fail_timeout(EngineWork& w, const char* detected_by) { return fail(w, detected_by, ""); }

  // The one failure path: the first late operation (`error` empty) or the first operation the
  // transport refused (`error`: the transport's message) dumps, prints, and fails the communicator,
  // so waiters throw and on_fatal ends the job as for a timeout. Returns the failure message (the
  // first one, whoever detected it).
  // `agreement`: the header table when the ranks disagreed on the operation (check_agreement).
  std::string fail(EngineWork& w, const char* detected_by, const std::string& error,
                   const nlohmann::json& agreement = nullptr);

  std::string current_failure();

  // Sleeps until `teardown_grace` has passed since the failure (see communicator.hpp, "Timeouts").
  void teardown_pause();

  void add_wait(double seconds) {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.wait_s += seconds;
  }
};

}  // namespace shardtrain::comm_detail
