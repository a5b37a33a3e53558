// The hang diagnosis as text (the default of hang-diagnose) and as JSON (--json): the same content.
#include <cstdio>
#include <sstream>

#include "shardtrain/diagnose/hang_diagnosis.hpp"

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/name_table.hpp"
#include "shardtrain/base/json_fields.hpp"

namespace shardtrain::hang {
namespace {

using nlohmann::json;

constexpr std::size_t kMismatchesShown = 10;  // the text lists the first ones; the JSON all

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string values_text(const Mismatch& m) {
  std::string out;
  for (const auto& [rank, v] : m.values) out += (out.empty() ? "" : ", ") + ("rank " + std::to_string(rank) + " " + v.dump());
  return out;
}

// The class of a diagnosis: the culprit's cause named for what an operator does about it.
FailureClass failure_class_of(const Diagnosis& d) {
  if (d.verdict == Verdict::kNoHang) return FailureClass::kNoHang;
  if (!d.culprit) return FailureClass::kAmbiguous;
  switch (d.culprit->cause) {
    case Cause::kSkipped: return FailureClass::kSkippedCollective;
    case Cause::kOutsideCollective: return FailureClass::kHangOutsideCollective;
    case Cause::kNoDump: return FailureClass::kDeadRank;
    case Cause::kMismatch: return FailureClass::kMismatch;
    case Cause::kErrorExit: return FailureClass::kErrorExit;
    case Cause::kStalledTransport: return FailureClass::kAmbiguous;  // every member joined; no rank is behind
  }
  return FailureClass::kAmbiguous;
}

}  // namespace

const char* cause_name(Cause c) { return name_in(kCauseNames, c); }
const char* failure_class_name(FailureClass c) { return name_in(kFailureClassNames, c); }

FailureClass parse_failure_class(const std::string& name, const std::string& where) {
  if (const std::optional<FailureClass> c = value_named(kFailureClassNames, name)) return *c;
  std::string known;
  for (const auto& [n, c] : kFailureClassNames) known += (known.empty() ? "" : ", ") + std::string(n);
  throw UsageError(where + " is '" + name + "', not a failure class (" + known + ")");
}

DiagnosisSummary Diagnosis::summary() const {
  DiagnosisSummary s;
  s.failure_class = failure_class_of(*this);
  if (culprit) {
    s.culprit_rank = culprit->rank;
    s.culprit_host = culprit->host;
    s.job_wide = culprit->job_wide;
  }
  auto at_blocked = [&] {
    if (!blocked) return;
    s.group = blocked->group;
    s.seq = blocked->seq;
    if (!blocked->op.empty()) {
      s.op = blocked->op;
      s.step = blocked->step;
      s.phase = blocked->phase;
    }
  };
  if (s.failure_class == FailureClass::kMismatch && !mismatches.empty()) {
    const Mismatch& m = mismatches.front();
    if (blocked && blocked->group == m.group && blocked->seq == m.seq) {
      at_blocked();
    } else {
      s.group = m.group;
      s.seq = m.seq;
      if (!m.op.empty()) {
        s.op = m.op;
        s.step = m.step;
        s.phase = m.phase;
      }
    }
  } else {
    at_blocked();
  }
  const bool own_place =
      s.failure_class == FailureClass::kHangOutsideCollective || s.failure_class == FailureClass::kErrorExit;
  if (own_place && culprit) {
    const RankStatus& r = ranks.at(std::size_t(culprit->rank));
    if (r.now.known) {
      s.step = r.now.step;
      s.phase = r.now.phase;
    }
    if (s.failure_class == FailureClass::kErrorExit && !blocked) {
      s.group.reset();
      s.seq.reset();
      s.op.reset();
    }
  }
  return s;
}

std::string Diagnosis::text() const {
  std::ostringstream o;
  o << "hang-diagnose: job " << (job_id.empty() ? "(unknown)" : job_id) << ", world size " << world_size << ", "
    << dumps.size() << " dump(s) read, " << missing_ranks.size() << " missing\n";
  o << "dumps:\n";
  for (const auto& d : dumps) o << "  rank " << d.rank << "  " << d.reason << "  at " << fixed(d.dumped_at, 3) << "  " << d.file << "\n";
  for (int r : missing_ranks) o << "  rank " << r << "  no dump (killed or crashed before it could write one)\n";
  if (blocked) {
    const BlockedCollective& b = *blocked;
    o << "blocked collective: " << b.group << " seq " << b.seq << " " << (b.op.empty() ? "(op unknown)" : b.op)
      << " numel " << b.numel << " " << b.dtype << " (step " << b.step << ", " << b.phase << ")\n"
      << "  joined: " << join(b.joined) << "; not joined: " << join(b.not_joined) << "; no dump: " << join(b.no_dump) << "\n";
  } else {
    o << "blocked collective: none\n";
  }
  o << "ranks:\n";
  for (const auto& r : ranks) o << "  rank " << r.rank << "  " << (r.dump ? r.reason : "-") << "  " << r.doing << "\n";
  o << "mismatches: " << (mismatches.empty() ? "none" : std::to_string(mismatches.size())) << "\n";
  for (std::size_t i = 0; i < mismatches.size() && i < kMismatchesShown; ++i) {
    const Mismatch& m = mismatches[i];
    o << "  " << m.group << " seq " << m.seq << " " << m.field << ": " << values_text(m) << "\n";
  }
  if (mismatches.size() > kMismatchesShown) o << "  ... (" << mismatches.size() - kMismatchesShown << " more; --json lists all)\n";
  o << "verdict: " << verdict_name(verdict) << (verdict == Verdict::kNoHang ? " (no hang found)" : "") << "\n";
  if (culprit)
    o << "culprit: rank " << culprit->rank << (culprit->host.empty() ? "" : " on " + culprit->host) << " ("
      << cause_name(culprit->cause) << (culprit->job_wide ? ", the whole job's error" : "") << "): " << culprit->evidence
      << "\n";
  else if (verdict == Verdict::kAmbiguous) o << "candidates: " << join(candidates) << "\n";
  o << "explanation:\n";
  for (const auto& sentence : explanation) o << "  " << sentence << "\n";
  return o.str();
}

json Diagnosis::to_json() const {
  json j;
  j["format"] = "shardtrain-hang-diagnosis";
  j["format_version"] = 2;
  j["job_id"] = job_id;
  j["world_size"] = world_size;
  j["dumps"] = json::array();
  for (const auto& d : dumps) j["dumps"].push_back({{"rank", d.rank}, {"file", d.file}, {"reason", d.reason}, {"dumped_at", d.dumped_at}});
  j["missing_ranks"] = missing_ranks;
  j["verdict"] = verdict_name(verdict);
  if (culprit) {
    const Culprit& c = *culprit;
    j["culprit"] = {{"rank", c.rank},
                    {"host", c.host.empty() ? json() : json(c.host)},
                    {"cause", cause_name(c.cause)},
                    {"job_wide", c.job_wide},
                    {"same_error_ranks", c.same_error_ranks},
                    {"error", c.error.empty() ? json() : json(c.error)},
                    {"evidence", c.evidence}};
  } else {
    j["culprit"] = nullptr;
  }
  j["candidates"] = candidates;
  j["summary"] = json_fields::write(summary());
  if (blocked) {
    const BlockedCollective& b = *blocked;
    j["blocked"] = {{"group", b.group}, {"seq", b.seq}, {"op", b.op}, {"numel", b.numel}, {"dtype", b.dtype},
                    {"step", b.step}, {"phase", b.phase}, {"joined", b.joined}, {"not_joined", b.not_joined},
                    {"no_dump", b.no_dump}};
    if (b.part_of)
      j["blocked"]["part_of"] = {{"group", b.part_of->group}, {"collective", b.part_of->collective},
                                 {"op", b.part_of->op}, {"numel", b.part_of->numel}};
  } else {
    j["blocked"] = nullptr;
  }
  j["ranks"] = json::array();
  for (const auto& r : ranks) {
    json now = r.now.known ? json{{"phase", r.now.phase}, {"step", r.now.step}, {"for_s", r.now_for_s}} : json();
    j["ranks"].push_back({{"rank", r.rank}, {"dump", r.dump}, {"reason", r.dump ? json(r.reason) : json()},
                          {"now", now}, {"doing", r.doing}});
  }
  j["mismatches"] = json::array();
  for (const auto& m : mismatches) {
    json values = json::object();
    for (const auto& [rank, v] : m.values) values[std::to_string(rank)] = v;
    j["mismatches"].push_back({{"group", m.group}, {"seq", m.seq}, {"field", m.field}, {"values", values}});
  }
  std::string text;
  for (const auto& sentence : explanation) text += (text.empty() ? "" : " ") + sentence;
  j["explanation"] = text;
  return j;
}

}  // namespace shardtrain::hang
