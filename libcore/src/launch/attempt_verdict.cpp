// The verdict of a failed attempt (attempt_verdict.hpp): the diagnose layer's typed summary, the
// straggler scores, or the two failure lines of a command's output.
#include "shardtrain/launch/attempt_verdict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <sys/stat.h>

#include "shardtrain/base/error.hpp"
#include "shardtrain/base/name_table.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/diagnose/flight_dump.hpp"
#include "shardtrain/diagnose/hang_diagnosis.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"
#include "shardtrain/telemetry/straggler.hpp"

namespace shardtrain::launch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

VerdictClass class_of(hang::FailureClass c) {
  switch (c) {
    case hang::FailureClass::kSkippedCollective: return VerdictClass::kSkippedCollective;
    case hang::FailureClass::kHangOutsideCollective: return VerdictClass::kHangOutsideCollective;
    case hang::FailureClass::kDeadRank: return VerdictClass::kDeadRank;
    case hang::FailureClass::kMismatch: return VerdictClass::kMismatch;
    case hang::FailureClass::kErrorExit: return VerdictClass::kErrorExit;
    case hang::FailureClass::kNoHang:  // records without a failure: stragglers are asked next
    case hang::FailureClass::kAmbiguous: return VerdictClass::kAmbiguous;
  }
  return VerdictClass::kAmbiguous;
}

std::vector<std::string> flight_record_files(const std::string& run_dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("flight.rank", 0) == 0 && e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool has_step_logs(const std::string& run_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("steps.rank", 0) == 0 && e.path().extension() == ".jsonl") return true;
  }
  return false;
}

// When the failure began, as the records tell: the first failure trigger (timeout, error, exit);
// without one (a rank died and mpirun ended the others), the first signal dump.
std::optional<double> first_trigger(const std::vector<hang::RankDump>& dumps) {
  std::optional<double> failure, signal;
  auto earliest = [](std::optional<double>& slot, double at) { slot = slot ? std::min(*slot, at) : at; };
  for (const auto& d : dumps)
    for (const auto& t : d.triggers) {
      if (!t.at) continue;
      if (t.reason == "timeout" || t.reason == "error" || t.reason == "exit") earliest(failure, *t.at);
      else if (t.reason == "signal") earliest(signal, *t.at);
    }
  return failure ? failure : signal;
}

// mpirun's report of ranks that died: "... rank R with PID P on node H exited on signal ...",
// rank -> host.
std::map<int, std::string> dead_ranks(const std::string& output) {
  static const std::regex died(R"(rank (\d+) with PID \d+ on node (\S+) exited on signal)");
  std::map<int, std::string> dead;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), died); it != std::sregex_iterator(); ++it)
    dead.emplace(std::stoi((*it)[1]), (*it)[2]);
  return dead;
}

}  // namespace

std::optional<LostNode> lost_node(const RankHosts& placement, const std::map<int, std::string>& recorded) {
  std::vector<LostNode> lost;
  bool other_host_alive = false;
  for (const auto& [host, ranks] : placement.ranks_by_host()) {
    const bool all_gone = std::none_of(ranks.begin(), ranks.end(), [&](int r) { return recorded.count(r); });
    if (all_gone) lost.push_back({host, ranks});
    else other_host_alive = true;
  }
  if (lost.size() != 1 || !other_host_alive) return std::nullopt;  // several, or the whole job: no one node
  return lost.front();
}

AttemptVerdict with_unreachable_host(AttemptVerdict v, const RankHosts& placement,
                                     const std::vector<std::string>& unreachable, const std::set<int>& recorded) {
  v.unreachable_hosts = unreachable;
  if (v.verdict_class == VerdictClass::kNodeLost) return v;
  const auto by_host = placement.ranks_by_host();
  std::vector<std::string> cut;
  for (const std::string& h : unreachable)
    if (by_host.count(h) && std::find(cut.begin(), cut.end(), h) == cut.end()) cut.push_back(h);
  if (cut.size() != 1 || by_host.size() < 2) return v;  // none, several, or a one-host job: no one node
  const std::vector<int>& ranks = by_host.at(cut.front());
  const bool silent = std::none_of(ranks.begin(), ranks.end(), [&](int r) { return recorded.count(r) > 0; });
  const bool others_recorded = std::any_of(recorded.begin(), recorded.end(), [&](int r) {
    return std::find(ranks.begin(), ranks.end(), r) == ranks.end();
  });
  v.records_class = v.verdict_class;
  v.verdict_class = silent && others_recorded ? VerdictClass::kNodeLost : VerdictClass::kNodeUnreachable;
  v.culprit_host = cut.front();
  v.lost_ranks = ranks;
  v.culprit_rank = v.lost_ranks.front();
  v.job_wide = false;
  return v;
}

std::set<int> ranks_with_records(const std::string& run_dir) {
  std::set<int> ranks;
  for (const std::string& f : flight_record_files(run_dir)) {
    try {
      ranks.insert(hang::read_flight_dump(f).rank);
    } catch (const Error&) {
      // unreadable: as if absent (judge_attempt says why)
    }
  }
  return ranks;
}

namespace {

std::string field_or_dash(const std::optional<std::string>& v) { return v ? *v : "-"; }
template <typename T>
std::string number_or_dash(const std::optional<T>& v) {
  return v ? std::to_string(*v) : "-";
}

}  // namespace

const char* verdict_class_name(VerdictClass c) { return name_in(kVerdictClassNames, c); }

const char* verdict_source_name(VerdictSource s) { return name_in(kVerdictSourceNames, s); }

std::string AttemptVerdict::line(int attempt) const {
  char diagnosed[48] = "-";
  if (diagnosis_s) std::snprintf(diagnosed, sizeof diagnosed, "%.2f s", *diagnosis_s);
  std::ostringstream o;
  std::string lost;
  for (int r : lost_ranks) lost += (lost.empty() ? "" : ",") + std::to_string(r);
  o << "verdict attempt " << attempt << ": " << verdict_class_name(verdict_class)
    << (lost.empty() ? "" : " host " + culprit_host + " (ranks " + lost + ")") << " rank "
    << number_or_dash(culprit_rank) << " (host " << (culprit_host.empty() ? "-" : culprit_host) << ") group "
    << field_or_dash(group) << " seq " << number_or_dash(seq) << " op " << field_or_dash(op) << " step "
    << number_or_dash(step) << " phase " << field_or_dash(phase) << (job_wide ? " (an error of the whole job)" : "")
    << (records_class ? std::string(" (the records alone: ") + verdict_class_name(*records_class) + ")" : "")
    << "; diagnosed in " << diagnosed;
  if (analysis_s) o << " (analysis " << int(std::lround(*analysis_s * 1000)) << " ms)";
  return o.str();
}

json AttemptVerdict::to_json(bool with_source) const {
  json j = json_fields::write_fields(*this, verdict_fields());
  if (with_source) j.update(json_fields::write_fields(*this, source_fields()));
  return j;
}

AttemptVerdict AttemptVerdict::from_json(const JsonFile& f, const std::string& at) {
  AttemptVerdict v;
  json_fields::read_fields(f, at, v, verdict_fields());
  // attemptN.verdict.json has the source part; the restart log's copy has none of its keys.
  if (f.has(json_fields::field(at, std::get<0>(source_fields()).name))) json_fields::read_fields(f, at, v, source_fields());
  return v;
}

AttemptVerdict verdict_from_output(const std::string& output) {
  AttemptVerdict v;
  v.source = VerdictSource::kCommandOutput;
  v.source_detail = "the command's output (no flight records)";
  // Our tools' error line: "[rank R/W] error ..." at the start of a line (base/log.hpp).
  static const std::regex our_error(R"(^\[rank (\d+)/\d+\] error)", std::regex::multiline);
  std::smatch m;
  if (std::regex_search(output, m, our_error)) {
    v.verdict_class = VerdictClass::kErrorExit;
    v.culprit_rank = std::stoi(m[1]);
    return v;
  }
  const std::map<int, std::string> dead = dead_ranks(output);
  if (!dead.empty()) {
    v.verdict_class = VerdictClass::kDeadRank;
    v.culprit_rank = dead.begin()->first;
    v.culprit_host = dead.begin()->second;
  }
  return v;
}

std::optional<RankHosts> attempt_placement(const AttemptEvidence& evidence, int world, std::string& detail) {
  try {
    struct stat st{};
    const std::string path = rank_hosts_path(evidence.run_dir);
    if (stat(path.c_str(), &st) != 0) return std::nullopt;
    if (double(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9 < evidence.launched_at) return std::nullopt;
    RankHosts h = read_rank_hosts(evidence.run_dir);
    if (world > 0 && int(h.hosts.size()) != world) return std::nullopt;
    return h;
  } catch (const Error& e) {
    detail += std::string(detail.empty() ? "" : "; ") + "hosts.json unreadable: " + e.what();
    return std::nullopt;
  }
}

namespace {

// The culprit's host from the attempt's placement, where nothing named it yet.
void host_from_placement(AttemptVerdict& v, const std::optional<RankHosts>& placement) {
  if (v.culprit_rank && v.culprit_host.empty() && placement && std::size_t(*v.culprit_rank) < placement->hosts.size())
    v.culprit_host = placement->hosts[std::size_t(*v.culprit_rank)];
}

AttemptVerdict verdict_without_records(const AttemptEvidence& evidence) {
  AttemptVerdict v = verdict_from_output(evidence.command_output);
  v.command_ended_at = evidence.command_ended_at;
  host_from_placement(v, attempt_placement(evidence, evidence.world_size, v.source_detail));
  return v;
}

// The readable records, each rank's host in `hosts`; why one is unreadable in v.source_detail.
std::vector<hang::RankDump> read_records(const std::vector<std::string>& files, std::map<int, std::string>& hosts,
                                         AttemptVerdict& v) {
  std::vector<hang::RankDump> dumps;
  for (const auto& f : files) {
    try {
      dumps.push_back(hang::read_flight_dump(f));
      hosts[dumps.back().rank] = dumps.back().hostname;
    } catch (const Error& e) {
      v.source_detail = std::string("hang diagnosis failed: ") + e.what();
    }
  }
  return dumps;
}

// The diagnose layer's summary of the whole set into `v`; true when the records hold no failure.
bool diagnose_records(const std::vector<hang::RankDump>& dumps, int world_size, AttemptVerdict& v) {
  try {
    const hang::DiagnosisSummary s = hang::diagnose(hang::check_dump_set(dumps, world_size)).summary();
    v.verdict_class = class_of(s.failure_class);
    v.job_wide = s.job_wide;
    if (!s.job_wide) v.culprit_rank = s.culprit_rank;  // an error of the whole job: nobody to exclude
    v.group = s.group;
    v.seq = s.seq;
    v.op = s.op;
    v.step = s.step;
    v.phase = s.phase;
    return s.failure_class == hang::FailureClass::kNoHang;
  } catch (const Error& e) {
    v.source_detail = std::string("hang diagnosis failed: ") + e.what();
    return false;
  }
}

void name_straggler(const std::string& run_dir, AttemptVerdict& v) {
  try {
    const StragglerReport report = straggler_report_from_run_dir(run_dir, StragglerOptions{});
    std::set<int> named;
    for (const auto& s : report.stragglers) named.insert(s.rank);
    if (named.size() == 1) {
      v.verdict_class = VerdictClass::kStraggler;
      v.culprit_rank = report.stragglers.front().rank;
      v.phase = section_name(report.stragglers.front().section);
      v.source = VerdictSource::kStragglerScores;
    }
  } catch (const Error& e) {
    v.source_detail = std::string("straggler scores failed: ") + e.what();
  }
}

void name_lost_node(const RankHosts& placement, const std::map<int, std::string>& hosts, AttemptVerdict& v) {
  if (const std::optional<LostNode> lost = lost_node(placement, hosts)) {
    v.verdict_class = VerdictClass::kNodeLost;
    v.culprit_host = lost->host;
    v.culprit_rank = lost->ranks.front();
    v.lost_ranks = lost->ranks;
    v.job_wide = false;
  }
}

void name_culprit_host(AttemptVerdict& v, const std::optional<RankHosts>& placement,
                       const std::map<int, std::string>& hosts, const std::string& command_output) {
  host_from_placement(v, placement);
  if (!v.culprit_rank) return;
  // Its record's host; a rank that left none (killed) is named with its host by mpirun.
  const auto h = hosts.find(*v.culprit_rank);
  if (h != hosts.end()) v.culprit_host = h->second;
  if (v.culprit_host.empty()) {
    const std::map<int, std::string> dead = dead_ranks(command_output);
    if (const auto d = dead.find(*v.culprit_rank); d != dead.end()) v.culprit_host = d->second;
  }
}

}  // namespace

AttemptVerdict judge_attempt(const AttemptEvidence& evidence) {
  const std::vector<std::string> files = flight_record_files(evidence.run_dir);
  if (files.empty()) return verdict_without_records(evidence);
  AttemptVerdict v;
  v.command_ended_at = evidence.command_ended_at;
  v.source = VerdictSource::kHangDiagnosis;
  // Each record alone first: its host and triggers count even when the set cannot be diagnosed.
  std::map<int, std::string> hosts;
  const std::vector<hang::RankDump> dumps = read_records(files, hosts, v);
  const bool no_failure = v.source_detail.empty() && diagnose_records(dumps, evidence.world_size, v);
  // Records without a failure in them: the one rank the step logs name as a straggler, if any.
  if (no_failure && has_step_logs(evidence.run_dir)) name_straggler(evidence.run_dir, v);
  // A lost node: every rank of one host without a record, ranks of another host with one.
  const int world = dumps.empty() ? evidence.world_size : dumps.front().world_size;
  const std::optional<RankHosts> placement = attempt_placement(evidence, world, v.source_detail);
  if (placement) name_lost_node(*placement, hosts, v);
  name_culprit_host(v, placement, hosts, evidence.command_output);
  if (const std::optional<double> first = first_trigger(dumps))
    v.diagnosis_s = std::round((evidence.now - *first) * 1000) / 1000;
  return v;
}

}  // namespace shardtrain::launch
