#include "shardtrain/comm/fault_injection.hpp"

#include <charconv>
#include <map>

#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

const char* kForms = "expected 'skip-collective:rank=R,step=S[,phase=P][,group=G]' or 'delay:rank=R,ms=M'";

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

void FaultInjection::add(const std::string& spec) {
  const std::size_t colon = spec.find(':');
  if (colon == std::string::npos) bad(spec, "no ':' after the fault kind");
  const std::string kind = spec.substr(0, colon);
  const std::string body = spec.substr(colon + 1);
  if (kind == "skip-collective") {
    if (skip) bad(spec, "skip-collective given twice");
    auto kv = parse_keys(spec, body, {"rank", "step"}, {"phase", "group"});
    SkipCollective s;
    s.rank = parse_rank(spec, kv["rank"]);
    s.step = parse_count(spec, "step", kv["step"]);
    if (kv.count("phase")) {
      try {
        s.phase = parse_phase(kv["phase"]);
      } catch (const UsageError& e) {
        bad(spec, e.what());
      }
    }
    if (kv.count("group")) {
      if (kv["group"].empty()) bad(spec, "group= is empty");
      s.group = kv["group"];
    }
    skip = s;
  } else if (kind == "delay") {
    if (delay) bad(spec, "delay given twice");
    auto kv = parse_keys(spec, body, {"rank", "ms"});
    delay = Delay{parse_rank(spec, kv["rank"]), parse_count(spec, "ms", kv["ms"])};
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
  if (delay) check(delay->rank, "delay");
}

std::string FaultInjection::describe() const {
  std::string out;
  if (skip) {
    out += "skip-collective:rank=" + std::to_string(skip->rank) + ",step=" + std::to_string(skip->step);
    if (skip->phase) out += std::string(",phase=") + phase_name(*skip->phase);
    if (skip->group) out += ",group=" + *skip->group;
  }
  if (delay) {
    if (!out.empty()) out += ' ';
    out += "delay:rank=" + std::to_string(delay->rank) + ",ms=" + std::to_string(delay->ms);
  }
  return out.empty() ? "none" : out;
}

}  // namespace shardtrain
