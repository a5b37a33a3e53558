#include "shardtrain/comm/flight_recorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "shardtrain/base/log.hpp"
#include "shardtrain/base/durable_file.hpp"

namespace shardtrain {

const char* flight_state_name(FlightState s) {
  switch (s) {
    case FlightState::kQueued: return "queued";
    case FlightState::kStarted: return "started";
    case FlightState::kCompleted: return "completed";
    case FlightState::kTimedOut: return "timed_out";
    case FlightState::kSkipped: return "skipped";
    case FlightState::kAborted: return "aborted";
  }
  return "unknown";
}

nlohmann::json FlightEntry::to_json() const {
  auto t = [](double x) -> nlohmann::json { return x > 0 ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {{"id", id},       {"seq", seq},        {"op", op_name(op)},   {"group", group},
          {"dtype", dtype_name(dtype)}, {"numel", numel}, {"bytes", bytes}, {"root", root},
          {"step", step},   {"state", flight_state_name(state)},
          {"t_enqueue", t(t_enqueue)}, {"t_start", t(t_start)}, {"t_end", t(t_end)}};
}

FlightRecorder::FlightRecorder(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {
  ring_.reserve(capacity_);
}

double FlightRecorder::now() {
  using namespace std::chrono;
  return double(duration_cast<microseconds>(system_clock::now().time_since_epoch()).count()) * 1e-6;
}

std::string FlightRecorder::register_group(const std::string& name, int rank, int size, std::vector<int> world_ranks) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string unique = name;
  for (int k = 2;; ++k) {
    bool taken = false;
    for (const auto& g : groups_) taken |= (g.name == unique);
    if (!taken) break;
    unique = name + "#" + std::to_string(k);
  }
  FlightGroup g;
  g.name = unique;
  g.rank = rank;
  g.size = size;
  g.world_ranks = std::move(world_ranks);
  groups_.push_back(std::move(g));
  return unique;
}

std::uint64_t FlightRecorder::record(FlightEntry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  entry.id = next_id_++;
  entry.state = FlightState::kQueued;
  entry.t_enqueue = now();
  for (auto& g : groups_)
    if (g.name == entry.group) g.last_enqueued = std::max(g.last_enqueued, entry.seq);
  if (ring_.size() < capacity_) ring_.push_back(std::move(entry));
  else ring_[entry.id % capacity_] = std::move(entry);
  return next_id_ - 1;
}

void FlightRecorder::mark(std::uint64_t id, FlightState state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= next_id_ || next_id_ - id > capacity_) return;  // unknown or overwritten
  FlightEntry& e = ring_[id % capacity_];
  e.state = state;
  const double t = now();
  if (state == FlightState::kStarted) e.t_start = t;
  if (state == FlightState::kCompleted || state == FlightState::kTimedOut || state == FlightState::kAborted) e.t_end = t;
  for (auto& g : groups_) {
    if (g.name != e.group) continue;
    if (state == FlightState::kStarted) g.last_started = std::max(g.last_started, e.seq);
    if (state == FlightState::kCompleted) g.last_completed = std::max(g.last_completed, e.seq);
  }
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FlightEntry> out;
  out.reserve(ring_.size());
  const std::uint64_t first = next_id_ > capacity_ ? next_id_ - capacity_ : 0;
  for (std::uint64_t id = first; id < next_id_; ++id) out.push_back(ring_[id % capacity_]);
  return out;
}

std::uint64_t FlightRecorder::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_ > capacity_ ? next_id_ - capacity_ : 0;
}

nlohmann::json FlightRecorder::to_json(int world_rank, int world_size, const std::string& reason,
                                       const nlohmann::json& trigger) const {
  const auto entries = snapshot();
  nlohmann::json j;
  j["format"] = "shardtrain-flight-record";
  j["format_version"] = 1;
  j["rank"] = world_rank;
  j["world_size"] = world_size;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["hostname"] = host;
  j["pid"] = static_cast<long>(getpid());
  j["code_version"] = code_version();
  j["reason"] = reason;
  j["dumped_at"] = now();
  j["trigger"] = trigger;
  j["capacity"] = capacity_;
  j["dropped"] = dropped();
  nlohmann::json groups = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& g : groups_)
      groups.push_back({{"name", g.name},
                        {"rank", g.rank},
                        {"size", g.size},
                        {"world_ranks", g.world_ranks},
                        {"last_enqueued_seq", g.last_enqueued},
                        {"last_started_seq", g.last_started},
                        {"last_completed_seq", g.last_completed}});
  }
  j["groups"] = groups;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : entries) list.push_back(e.to_json());
  j["entries"] = list;
  return j;
}

void FlightRecorder::dump(const std::string& path, int world_rank, int world_size, const std::string& reason,
                          const nlohmann::json& trigger) const {
  write_json_file(path, to_json(world_rank, world_size, reason, trigger));
}

}  // namespace shardtrain
