#include "engine_work.hpp"

#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

namespace shardtrain::comm_detail {
namespace {

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

}  // namespace

std::string Core::describe(const EngineWork& w) const {
  const auto& r = w.request();
  std::ostringstream s;
  s << op_name(r.op) << "(seq=" << w.seq() << ", group=" << name << ", numel=" << r.count
    << ", bytes=" << transfer_bytes(r, size) << ", timeout_ms=" << options.timeout.count() << ")";
  return s.str();
}

std::string Core::fail(EngineWork& w, const char* detected_by, const std::string& error,
                       const nlohmann::json& agreement) {
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

std::string Core::current_failure() {
  std::lock_guard<std::mutex> lock(fail_mu);
  return failed.load() ? failure_message
                       : "communicator '" + name + "' was destroyed before this operation completed";
}

void Core::teardown_pause() {
  Clock::time_point until;
  {
    std::lock_guard<std::mutex> lock(fail_mu);
    if (!failed.load()) return;
    until = fail_time + options.teardown_grace;
  }
  std::this_thread::sleep_until(until);
}

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

}  // namespace shardtrain::comm_detail
