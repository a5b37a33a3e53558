#include "shardtrain/comm/fault_injection.hpp"

#include <charconv>
#include <chrono>
#include <csignal>
#include <map>
#include <thread>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

const char* kForms =
    "expected skip-collective:rank=R,step=S[,phase=P][,group=G], wrong-count:rank=R,step=S[,phase=P][,group=G], "
    "hang:rank=R,step=S[,phase=P], kill:rank=R,step=S[,phase=P], delay:rank=R,ms=M[,phase=P] or slow-data:rank=R,ms=M";

[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  throw UsageError("--inject '" + spec + "': " + why + " (" + kForms + ")");
}

std::int64_t parse_count(const std::string& spec, const std::string& key, const std::string& text) {
  std::int64_t value = -1;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0)
    bad(spec, key + "='" + text + "' is not a non-negative integer");
  return value;
}

// "k1=v1,k2=v2" -> map of the texts; every key of `required`, any of `optional`, nothing else.
std::map<std::string, std::string> parse_keys(const std::string& spec, const std::string& body,
                                              const std::vector<std::string>& required,
                                              const std::vector<std::string>& optional = {}) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos <= body.size()) {
    const std::size_t comma = body.find(',', pos);
    const std::string item = body.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) bad(spec, "'" + item + "' is not key=value");
    const std::string key = item.substr(0, eq);
    bool known = false;
    for (const auto& k : required) known |= (k == key);
    for (const auto& k : optional) known |= (k == key);
    if (!known) bad(spec, "unknown key '" + key + "'");
    if (out.count(key)) bad(spec, "key '" + key + "' given twice");
    out[key] = item.substr(eq + 1);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  for (const auto& k : required)
    if (!out.count(k)) bad(spec, "missing key '" + k + "'");
  return out;
}

int parse_rank(const std::string& spec, const std::string& text) {
  const std::int64_t rank = parse_count(spec, "rank", text);
  if (rank > 1 << 30) bad(spec, "rank is too large");
  return int(rank);
}

}  // namespace

namespace {

Phase parse_phase_key(const std::string& spec, const std::string& text) {
  try {
    return parse_phase(text);
  } catch (const UsageError& e) {
    bad(spec, e.what());
  }
}

FaultInjection::CollectiveFault parse_collective_fault(const std::string& spec, const std::string& body) {
  auto kv = parse_keys(spec, body, {"rank", "step"}, {"phase", "group"});
  FaultInjection::CollectiveFault f;
  f.rank = parse_rank(spec, kv["rank"]);
  f.step = parse_count(spec, "step", kv["step"]);
  if (kv.count("phase")) f.phase = parse_phase_key(spec, kv["phase"]);
  if (kv.count("group")) {
    if (kv["group"].empty()) bad(spec, "group= is empty");
    f.group = kv["group"];
  }
  return f;
}

FaultInjection::PhaseFault parse_phase_fault(const std::string& spec, const std::string& body) {
  auto kv = parse_keys(spec, body, {"rank", "step"}, {"phase"});
  FaultInjection::PhaseFault f;
  f.rank = parse_rank(spec, kv["rank"]);
  f.step = parse_count(spec, "step", kv["step"]);
  if (kv.count("phase")) f.phase = parse_phase_key(spec, kv["phase"]);
  return f;
}

template <typename T>
void set_once(std::optional<T>& slot, T value, const std::string& spec, const char* kind) {
  if (slot) bad(spec, std::string(kind) + " given twice");
  slot = std::move(value);
}

std::string describe_collective(const char* kind, const FaultInjection::CollectiveFault& f) {
  std::string out = std::string(kind) + ":rank=" + std::to_string(f.rank) + ",step=" + std::to_string(f.step);
  if (f.phase) out += std::string(",phase=") + phase_name(*f.phase);
  if (f.group) out += ",group=" + *f.group;
  return out;
}

std::string describe_phase(const char* kind, const FaultInjection::PhaseFault& f) {
  return std::string(kind) + ":rank=" + std::to_string(f.rank) + ",step=" + std::to_string(f.step) +
         ",phase=" + phase_name(f.phase);
}

}  // namespace

void FaultInjection::add(const std::string& spec) {
  const std::size_t colon = spec.find(':');
  if (colon == std::string::npos) bad(spec, "no ':' after the fault kind");
  const std::string kind = spec.substr(0, colon);
  const std::string body = spec.substr(colon + 1);
  if (kind == "skip-collective") {
    set_once(skip, parse_collective_fault(spec, body), spec, "skip-collective");
  } else if (kind == "wrong-count") {
    set_once(wrong_count, parse_collective_fault(spec, body), spec, "wrong-count");
  } else if (kind == "hang") {
    set_once(hang, parse_phase_fault(spec, body), spec, "hang");
  } else if (kind == "kill") {
    set_once(kill, parse_phase_fault(spec, body), spec, "kill");
  } else if (kind == "delay" || kind == "slow-data") {
    const bool slow_data = kind == "slow-data";
    auto kv = slow_data ? parse_keys(spec, body, {"rank", "ms"}) : parse_keys(spec, body, {"rank", "ms"}, {"phase"});
    const int rank = kv["rank"] == "all" ? kEveryRank : parse_rank(spec, kv["rank"]);
    Delay d{rank, parse_count(spec, "ms", kv["ms"]), Phase::kData};
    if (kv.count("phase")) d.phase = parse_phase_key(spec, kv["phase"]);
    set_once(delay, d, spec, kind.c_str());  // delay and slow-data share one slot
  } else {
    bad(spec, "unknown fault kind '" + kind + "'");
  }
}

FaultInjection FaultInjection::parse(const std::vector<std::string>& specs) {
  FaultInjection f;
  for (const auto& s : specs) f.add(s);
  return f;
}

void FaultInjection::validate(int world_size) const {
  auto check = [&](int rank, const char* kind) {
    if (rank >= world_size)
      throw UsageError(std::string("--inject ") + kind + ": rank=" + std::to_string(rank) +
                       " but the job has only " + std::to_string(world_size) + " rank(s) (0.." +
                       std::to_string(world_size - 1) + ")");
  };
  if (skip) check(skip->rank, "skip-collective");
  if (wrong_count) check(wrong_count->rank, "wrong-count");
  if (hang) check(hang->rank, "hang");
  if (kill) check(kill->rank, "kill");
  if (delay && delay->rank != kEveryRank) check(delay->rank, "delay");
}

std::string FaultInjection::describe() const {
  std::vector<std::string> parts;
  if (skip) parts.push_back(describe_collective("skip-collective", *skip));
  if (wrong_count) parts.push_back(describe_collective("wrong-count", *wrong_count));
  if (hang) parts.push_back(describe_phase("hang", *hang));
  if (kill) parts.push_back(describe_phase("kill", *kill));
  if (delay)
    parts.push_back("delay:rank=" + (delay->rank == kEveryRank ? std::string("all") : std::to_string(delay->rank)) + ",ms=" + std::to_string(delay->ms) + ",phase=" +
                    phase_name(delay->phase));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out.empty() ? "none" : out;
}

PhaseFaultGuard::PhaseFaultGuard(const FaultInjection& faults, int world_rank) {
  auto mine = [&](const auto& f) { return f && f->rank == world_rank; };
  if (!mine(faults.hang) && !mine(faults.kill) && !(faults.delay && faults.delay->applies_to(world_rank))) return;
  const FaultInjection f = faults;
  set_phase_observer([f, world_rank](Phase phase, std::int64_t step) {
    if (const auto ms = f.delay_ms_for(world_rank, phase); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    auto fires = [&](const std::optional<FaultInjection::PhaseFault>& x) {
      return x && x->rank == world_rank && x->step == step && x->phase == phase;
    };
    if (fires(f.kill)) std::raise(SIGKILL);
    if (fires(f.hang))
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until the launcher kills the job
  });
  installed_ = true;
}

PhaseFaultGuard::~PhaseFaultGuard() {
  if (installed_) set_phase_observer(nullptr);
}

}  // namespace shardtrain
