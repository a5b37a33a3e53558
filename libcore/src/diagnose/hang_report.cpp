// The hang diagnosis as text (the default of hang-diagnose) and as JSON (--json): the same content.
#include <cstdio>
#include <sstream>

#include "shardtrain/diagnose/hang_diagnosis.hpp"

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

// The launcher's class of a diagnosis (run-resilient.sh's verdict line): the culprit's cause named
// for what an operator does about it.
std::string failure_class(const Diagnosis& d) {
  if (d.verdict == Verdict::kNoHang) return "no-hang";
  if (!d.culprit) return "ambiguous";
  const std::string& cause = d.culprit->cause;
  if (cause == "skipped") return "skipped-collective";
  if (cause == "outside-collective") return "hang-outside-collective";
  if (cause == "no-dump") return "dead-rank";
  if (cause == "mismatch" || cause == "error-exit") return cause;
  return "ambiguous";  // stalled-transport: every member joined; no rank is behind
}

// {"class", "culprit_rank", "group", "seq", "op", "step", "phase"}: one line's worth. Where the
// culprit was: for a rank hung outside any collective its own phase and step (its "now"), for an
// error exit the phase and step it left in; otherwise the collective it broke (the mismatched one,
// else the blocked one). Unknown fields are null.
json summary_json(const Diagnosis& d) {
  json s = {{"class", failure_class(d)}, {"culprit_rank", d.culprit ? json(d.culprit->rank) : json()},
            {"group", nullptr}, {"seq", nullptr}, {"op", nullptr}, {"step", nullptr}, {"phase", nullptr}};
  auto at_blocked = [&] {
    if (!d.blocked) return;
    const BlockedCollective& b = *d.blocked;
    s["group"] = b.group;
    s["seq"] = b.seq;
    if (!b.op.empty()) s.update({{"op", b.op}, {"step", b.step}, {"phase", b.phase}});
  };
  const std::string cls = s["class"];
  if (cls == "mismatch" && !d.mismatches.empty()) {
    const Mismatch& m = d.mismatches.front();
    if (d.blocked && d.blocked->group == m.group && d.blocked->seq == m.seq) at_blocked();
    else s.update({{"group", m.group}, {"seq", m.seq}});
  } else {
    at_blocked();
  }
  if ((cls == "hang-outside-collective" || cls == "error-exit") && d.culprit) {
    const RankStatus& r = d.ranks.at(std::size_t(d.culprit->rank));
    if (r.now.known) s.update({{"step", r.now.step}, {"phase", r.now.phase}});
    if (cls == "error-exit" && !d.blocked) s.update({{"group", nullptr}, {"seq", nullptr}, {"op", nullptr}});
  }
  return s;
}

}  // namespace

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
  if (culprit) o << "culprit: rank " << culprit->rank << " (" << culprit->cause << "): " << culprit->evidence << "\n";
  else if (verdict == Verdict::kAmbiguous) o << "candidates: " << join(candidates) << "\n";
  o << "explanation:\n";
  for (const auto& sentence : explanation) o << "  " << sentence << "\n";
  return o.str();
}

json Diagnosis::to_json() const {
  json j;
  j["format"] = "shardtrain-hang-diagnosis";
  j["format_version"] = 1;
  j["job_id"] = job_id;
  j["world_size"] = world_size;
  j["dumps"] = json::array();
  for (const auto& d : dumps) j["dumps"].push_back({{"rank", d.rank}, {"file", d.file}, {"reason", d.reason}, {"dumped_at", d.dumped_at}});
  j["missing_ranks"] = missing_ranks;
  j["verdict"] = verdict_name(verdict);
  j["culprit"] = culprit ? json{{"rank", culprit->rank}, {"cause", culprit->cause}, {"evidence", culprit->evidence}} : json();
  j["candidates"] = candidates;
  j["summary"] = summary_json(*this);
  if (blocked) {
    const BlockedCollective& b = *blocked;
    j["blocked"] = {{"group", b.group}, {"seq", b.seq}, {"op", b.op}, {"numel", b.numel}, {"dtype", b.dtype},
                    {"step", b.step}, {"phase", b.phase}, {"joined", b.joined}, {"not_joined", b.not_joined},
                    {"no_dump", b.no_dump}};
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
