#include "shardtrain/comm/flight_recorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>

#include "shardtrain/base/host.hpp"
#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/log.hpp"

namespace shardtrain {
namespace {

// Entry ids: one counter for the process, so the entries of all groups of a rank interleave in
// submission order.
std::atomic<std::uint64_t> g_next_entry_id{0};

// The live recorders, by world rank, in registration order.
struct Registry {
  std::mutex mu;
  struct Item {
    int world_rank;
    std::weak_ptr<FlightRecorder> recorder;
    const FlightRecorder* key;
  };
  std::vector<Item> items;
  std::mutex dump_mu;  // one dump at a time: two groups of a rank timing out together share a file
  // Every dump written so far, per world rank (guarded by dump_mu): a later dump keeps them.
  std::map<int, nlohmann::json> triggers;
  // The groups of each rank's last dump (guarded by dump_mu): a group gone since (its communicator
  // destroyed while the rank unwound from a failure) stays in later dumps, marked not live.
  std::map<int, nlohmann::json> last_groups;
  std::string job_id;  // guarded by mu

  std::vector<std::shared_ptr<FlightRecorder>> of_rank(int world_rank) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::shared_ptr<FlightRecorder>> out;
    for (const auto& it : items)
      if (it.world_rank == world_rank)
        if (auto r = it.recorder.lock()) out.push_back(std::move(r));
    return out;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

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

nlohmann::json CollectivePart::to_json() const {
  return {{"group", group}, {"collective", collective}, {"op", op_name(op)}, {"numel", numel}};
}

nlohmann::json FlightEntry::to_json() const {
  auto t = [](double x) -> nlohmann::json { return x > 0 ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"id", id},       {"seq", seq},        {"op", op_name(op)},   {"group", group},
                      {"dtype", dtype_name(dtype)}, {"numel", numel}, {"bytes", bytes}, {"root", root},
                      {"step", step},   {"phase", phase_name(phase)}, {"state", flight_state_name(state)},
                      {"t_enqueue", t(t_enqueue)}, {"t_start", t(t_start)}, {"t_end", t(t_end)}};
  if (part_of) j["part_of"] = part_of->to_json();
  return j;
}

FlightRecorder::FlightRecorder(FlightGroup group, std::size_t capacity) : capacity_(capacity), group_(std::move(group)) {
  ring_.reserve(capacity_);
}

double FlightRecorder::now() {
  using namespace std::chrono;
  return double(duration_cast<microseconds>(system_clock::now().time_since_epoch()).count()) * 1e-6;
}

std::uint64_t FlightRecorder::record(FlightEntry entry) {
  if (capacity_ == 0) return 0;  // off
  std::lock_guard<std::mutex> lock(mu_);
  entry.id = g_next_entry_id.fetch_add(1, std::memory_order_relaxed);
  entry.state = FlightState::kQueued;
  entry.t_enqueue = now();
  group_.last_enqueued = std::max(group_.last_enqueued, entry.seq);
  if (ring_.size() < capacity_) ring_.push_back(std::move(entry));
  else ring_[next_ticket_ % capacity_] = std::move(entry);
  return next_ticket_++;
}

void FlightRecorder::mark(std::uint64_t ticket, FlightState state) {
  if (capacity_ == 0) return;  // off
  std::lock_guard<std::mutex> lock(mu_);
  if (ticket >= next_ticket_ || next_ticket_ - ticket > capacity_) return;  // unknown or overwritten
  FlightEntry& e = ring_[ticket % capacity_];
  e.state = state;
  const double t = now();
  if (state == FlightState::kStarted) e.t_start = t;
  if (state == FlightState::kCompleted || state == FlightState::kTimedOut || state == FlightState::kAborted) e.t_end = t;
  if (state == FlightState::kStarted) group_.last_started = std::max(group_.last_started, e.seq);
  if (state == FlightState::kCompleted) group_.last_completed = std::max(group_.last_completed, e.seq);
}

std::vector<FlightEntry> FlightRecorder::entries_locked() const {
  std::vector<FlightEntry> out;
  out.reserve(ring_.size());
  for (std::uint64_t t = dropped_locked(); t < next_ticket_; ++t) out.push_back(ring_[t % capacity_]);
  return out;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_locked();
}

std::optional<FlightEntry> FlightRecorder::oldest_unfinished() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<FlightEntry> oldest;
  for (const FlightEntry& e : ring_) {
    const bool unfinished =
        e.state == FlightState::kQueued || e.state == FlightState::kStarted || e.state == FlightState::kTimedOut;
    if (unfinished && (!oldest || e.t_enqueue < oldest->t_enqueue)) oldest = e;
  }
  return oldest;
}

std::uint64_t FlightRecorder::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_locked();
}

nlohmann::json FlightRecorder::to_json() const {
  std::unique_lock<std::mutex> lock(mu_);  // one consistent picture
  const FlightGroup g = group_;
  const std::uint64_t dropped_now = dropped_locked();
  const auto list = entries_locked();
  lock.unlock();
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : list) entries.push_back(e.to_json());
  return {{"name", g.name},
          {"rank", g.rank},
          {"size", g.size},
          {"world_ranks", g.world_ranks},
          {"phase", g.phase ? nlohmann::json(phase_name(*g.phase)) : nlohmann::json(nullptr)},
          {"last_enqueued_seq", g.last_enqueued},
          {"last_started_seq", g.last_started},
          {"last_completed_seq", g.last_completed},
          {"capacity", capacity_},
          {"dropped", dropped_now},
          {"entries", entries}};
}

std::shared_ptr<FlightRecorder> register_flight_recorder(int world_rank, FlightGroup group, std::size_t capacity) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  const std::string wanted = group.name;
  for (int k = 2;; ++k) {
    bool taken = false;
    for (const auto& it : reg.items) {
      if (it.world_rank != world_rank) continue;
      if (auto r = it.recorder.lock()) taken |= r->name() == group.name;
    }
    if (!taken) break;
    group.name = wanted + "#" + std::to_string(k);
  }
  auto recorder = std::make_shared<FlightRecorder>(std::move(group), capacity);
  reg.items.push_back({world_rank, recorder, recorder.get()});
  return recorder;
}

std::optional<FlightEntry> oldest_in_flight(int world_rank) {
  std::optional<FlightEntry> oldest;
  for (const auto& recorder : registry().of_rank(world_rank))
    if (auto e = recorder->oldest_unfinished(); e && (!oldest || e->t_enqueue < oldest->t_enqueue)) oldest = std::move(e);
  return oldest;
}

void retire_flight_recorder(const FlightRecorder* recorder) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.items.erase(std::remove_if(reg.items.begin(), reg.items.end(),
                                 [&](const Registry::Item& it) { return it.key == recorder || it.recorder.expired(); }),
                  reg.items.end());
}

void set_flight_job_id(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().job_id = job_id;
}

std::string flight_job_id() {
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().job_id;
}

namespace {

// A reason that says why the rank failed, rather than a snapshot on demand.
bool is_failure_reason(const std::string& reason) { return reason == "timeout" || reason == "error" || reason == "exit"; }

// `now` and `phases` (FORMATS.md): where the rank is outside its collectives.
void add_phase_state(nlohmann::json& j) {
  const auto transitions = phase_history();
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& t : transitions) phases.push_back({{"phase", phase_name(t.phase)}, {"step", t.step}, {"t", t.t}});
  j["now"] = {{"phase", phase_name(current_phase())},
              {"step", current_step()},
              {"since", transitions.empty() ? nlohmann::json(nullptr) : nlohmann::json(transitions.back().t)}};
  j["phases"] = std::move(phases);
}

// The dump's cause among all its triggers: the first failure, else the latest one.
const nlohmann::json& cause_of(const nlohmann::json& triggers) {
  for (const auto& t : triggers)
    if (is_failure_reason(t["reason"].get<std::string>())) return t;
  return triggers.back();
}

nlohmann::json record_json(int world_rank, int world_size, const nlohmann::json& triggers) {
  const nlohmann::json& cause = cause_of(triggers);
  const nlohmann::json& trigger = cause["trigger"];
  nlohmann::json j;
  j["format"] = "shardtrain-flight-record";
  j["format_version"] = 3;
  j["job_id"] = flight_job_id();
  j["rank"] = world_rank;
  j["world_size"] = world_size;
  j["hostname"] = host_name();
  j["pid"] = static_cast<long>(getpid());
  j["code_version"] = code_version();
  j["reason"] = cause["reason"];
  j["dumped_at"] = triggers.back()["at"];
  j["timed_out_group"] = trigger.is_object() && trigger.contains("group") ? trigger["group"] : nlohmann::json(nullptr);
  j["trigger"] = trigger;
  j["triggers"] = triggers;
  add_phase_state(j);
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& r : registry().of_rank(world_rank)) {
    groups.push_back(r->to_json());
    groups.back()["live"] = true;
  }
  if (auto it = registry().last_groups.find(world_rank); it != registry().last_groups.end())
    for (const auto& old : it->second) {
      const bool replaced = std::any_of(groups.begin(), groups.end(), [&](const nlohmann::json& g) { return g["name"] == old["name"]; });
      if (replaced) continue;
      groups.push_back(old);
      groups.back()["live"] = false;
    }
  j["groups"] = groups;
  return j;
}

nlohmann::json trigger_record(const std::string& reason, const nlohmann::json& trigger) {
  return {{"reason", reason}, {"at", FlightRecorder::now()}, {"trigger", trigger}};
}

}  // namespace

namespace {

// The rank's remembered triggers plus this one (dump_mu held).
nlohmann::json triggers_with(int world_rank, const std::string& reason, const nlohmann::json& trigger) {
  auto it = registry().triggers.find(world_rank);
  nlohmann::json triggers = it != registry().triggers.end() ? it->second : nlohmann::json::array();
  triggers.push_back(trigger_record(reason, trigger));
  return triggers;
}

}  // namespace

nlohmann::json flight_record_json(int world_rank, int world_size, const std::string& reason,
                                  const nlohmann::json& trigger) {
  std::lock_guard<std::mutex> lock(registry().dump_mu);
  return record_json(world_rank, world_size, triggers_with(world_rank, reason, trigger));
}

void write_flight_record(const std::string& path, int world_rank, int world_size, const std::string& reason,
                         const nlohmann::json& trigger) {
  std::lock_guard<std::mutex> lock(registry().dump_mu);
  nlohmann::json& triggers = registry().triggers[world_rank];
  triggers = triggers_with(world_rank, reason, trigger);
  const nlohmann::json record = record_json(world_rank, world_size, triggers);
  registry().last_groups[world_rank] = record["groups"];
  write_json_file(path, record, Durability::kVisible);  // see Durability::kVisible: a deadline, not a power failure
}

void forget_flight_triggers() {
  std::lock_guard<std::mutex> lock(registry().dump_mu);
  registry().triggers.clear();
  registry().last_groups.clear();
}

}  // namespace shardtrain
