// The verdict of one failed attempt of a resilient job: which class of failure, which rank on
// which host to blame, and where. Judged from typed sources only, in this order:
//   1. the attempt's flight records (RUN_DIR/flight.rank*.json) through the diagnose layer
//      (hang::diagnose and its DiagnosisSummary: nothing reads the evidence sentences);
//   2. records that show no failure: the one rank the step logs name as a straggler, if exactly
//      one is named (telemetry/straggler.hpp);
//   2b. a lost node: RUN_DIR/hosts.json (telemetry/rank_hosts.hpp) names every rank's host; when
//      every rank of one host left no record while ranks of another host did, the verdict is
//      node-lost: that host, with its ranks (one dead rank alone is dead-rank, its host named);
//   2c. a partition (the launcher's probe, host_probe.hpp, after the rules above): when exactly one
//      host of the job does not answer while the others do, the verdict is node-unreachable: that
//      host, with its ranks, whatever the records said (the healthy ranks that timed out waiting
//      for it are not to blame); but when none of that host's ranks left a record while a rank of
//      another host did, node-lost (a cut-off node's ranks still run and record their timeout; a
//      gone one's cannot; rule 2b misses this when a healthy host's ranks were ended before they
//      wrote theirs); see with_unreachable_host below;
//   3. no flight records at all: the command's output, for the two lines a failure there leaves:
//      our tools' "[rank R/W] error" line (error-exit) and mpirun's "rank R with PID P on node H
//      exited on signal" (dead-rank; the lowest such rank, with its host).
// An error every rank exited with (job_wide) has no culprit to count: nobody is excluded for it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/telemetry/rank_hosts.hpp"

namespace shardtrain::launch {

enum class VerdictClass {
  kSkippedCollective, kMismatch, kHangOutsideCollective, kDeadRank, kNodeLost, kNodeUnreachable, kErrorExit,
  kStraggler, kAmbiguous
};
inline constexpr std::pair<const char*, VerdictClass> kVerdictClassNames[] = {
    {"skipped-collective", VerdictClass::kSkippedCollective},
    {"mismatch", VerdictClass::kMismatch},
    {"hang-outside-collective", VerdictClass::kHangOutsideCollective},
    {"dead-rank", VerdictClass::kDeadRank},
    {"node-lost", VerdictClass::kNodeLost},
    {"node-unreachable", VerdictClass::kNodeUnreachable},
    {"error-exit", VerdictClass::kErrorExit},
    {"straggler", VerdictClass::kStraggler},
    {"ambiguous", VerdictClass::kAmbiguous}};
const char* verdict_class_name(VerdictClass c);

enum class VerdictSource { kHangDiagnosis, kStragglerScores, kCommandOutput, kNothing };
inline constexpr std::pair<const char*, VerdictSource> kVerdictSourceNames[] = {
    {"hang-diagnosis", VerdictSource::kHangDiagnosis},
    {"straggler-scores", VerdictSource::kStragglerScores},
    {"command-output", VerdictSource::kCommandOutput},
    {"nothing", VerdictSource::kNothing}};
const char* verdict_source_name(VerdictSource s);

struct AttemptVerdict {
  VerdictClass verdict_class = VerdictClass::kAmbiguous;
  std::optional<int> culprit_rank;  // none when ambiguous, or for an error of the whole job
  std::string culprit_host;         // "" unknown
  bool job_wide = false;
  std::vector<int> lost_ranks;      // node-lost, node-unreachable: every rank of culprit_host (culprit_rank the lowest)
  // Hosts of the job the launcher's probe could not reach after the attempt (empty: every host
  // answered, or no probe was made: one host, or no port to probe).
  std::vector<std::string> unreachable_hosts;
  // The class the records alone gave, when the probe overrode it (node-unreachable, or node-lost
  // by rule 2c).
  std::optional<VerdictClass> records_class;
  std::optional<std::string> group, op, phase;
  std::optional<std::uint64_t> seq;
  std::optional<std::int64_t> step;
  // Seconds from the first failure trigger in the records (a timeout, an error, an exit; else the
  // first signal dump: when the failure was noticed) to the verdict; empty without records.
  std::optional<double> diagnosis_s;
  VerdictSource source = VerdictSource::kNothing;
  std::string source_detail;  // e.g. why hang-diagnosis could not be used ("" when it was)
  double command_ended_at = 0;  // unix s: when the attempt's command exited
  // Seconds the launcher itself took: records read to verdict made (the analysis, not the
  // teardown before it).
  std::optional<double> analysis_s;

  // The verdict line the launcher prints:
  // "verdict attempt N: CLASS rank R (host H) group G seq S op OP step K phase P; diagnosed in X.XX s"
  // (unknown fields "-"), then " (analysis N ms)" when analysis_s is known.
  std::string line(int attempt) const;
  // JSON (the restart log's "verdict"): verdict_fields(); with_source adds source_fields()
  // (attemptN.verdict.json), which from_json reads when they are there.
  nlohmann::json to_json(bool with_source = false) const;
  static AttemptVerdict from_json(const JsonFile& file, const std::string& at = "");
  static auto verdict_fields() {
    using namespace json_fields;
    using V = AttemptVerdict;
    return std::tuple{key("class", &V::verdict_class, names(kVerdictClassNames)), key("culprit_rank", &V::culprit_rank),
                      key("culprit_host", &V::culprit_host, empty_as_null, kMayBeAbsent), key("job_wide", &V::job_wide),
                      key("lost_ranks", &V::lost_ranks, ranks, kMayBeAbsent),
                      key("unreachable_hosts", &V::unreachable_hosts, kMayBeAbsent),
                      key("records_class", &V::records_class, names(kVerdictClassNames), kMayBeAbsent),
                      key("group", &V::group), key("seq", &V::seq), key("op", &V::op), key("step", &V::step),
                      key("phase", &V::phase), key("diagnosis_s", &V::diagnosis_s)};
  }
  static auto source_fields() {
    using namespace json_fields;
    using V = AttemptVerdict;
    return std::tuple{key("source", &V::source, names(kVerdictSourceNames)), key("source_detail", &V::source_detail),
                      key("command_ended_at", &V::command_ended_at), key("analysis_s", &V::analysis_s)};
  }
  bool operator==(const AttemptVerdict&) const = default;
};

// What judge_attempt reads.
struct AttemptEvidence {
  std::string run_dir;         // its flight.rank*.json and steps.rank*.jsonl
  std::string command_output;  // everything the attempt printed
  int world_size = 0;          // the attempt's rank count (0: take the records' own)
  double command_ended_at = 0; // unix seconds when the command exited
  double now = 0;              // unix seconds at judging time (for diagnosis_s)
  // Unix seconds when the attempt was launched: RUN_DIR/hosts.json written before it is an earlier
  // job's table (an attempt that failed before its ranks started writes none) and is not used.
  // 0: any table of the attempt's world size is taken.
  double launched_at = 0;
};

// RUN_DIR/hosts.json when it describes this attempt: written since evidence.launched_at, of `world`
// ranks (0: any count). A table that cannot be read is nothing, the reason appended to `detail`.
std::optional<RankHosts> attempt_placement(const AttemptEvidence& evidence, int world, std::string& detail);

AttemptVerdict judge_attempt(const AttemptEvidence& evidence);

// Rule 3 alone (exposed for its tests): the verdict of a command's output without records.
AttemptVerdict verdict_from_output(const std::string& output);

// Rule 2b alone: the one host all of whose ranks left no record (`recorded`: rank -> host of every
// record read) while some other host's ranks did; nothing when no host, several hosts, or every
// host is gone (the whole job died: no one node to blame).
struct LostNode {
  std::string host;
  std::vector<int> ranks;
};
std::optional<LostNode> lost_node(const RankHosts& placement, const std::map<int, std::string>& recorded);

// Rule 2c: `verdict` with the probe's answer (`unreachable`: the hosts that did not answer, out of
// the job's `placement`; `recorded`: the ranks that left a flight record in this attempt). Exactly
// one unreachable host while another host of the job answered: node-unreachable, that host and its
// ranks (culprit its lowest rank; the records' class kept in records_class), or node-lost when no
// rank of that host left a record and a rank of another host did. Otherwise the verdict is
// unchanged but for unreachable_hosts (a node-lost verdict is kept as it is: a host that is gone
// does not answer either).
AttemptVerdict with_unreachable_host(AttemptVerdict verdict, const RankHosts& placement,
                                     const std::vector<std::string>& unreachable, const std::set<int>& recorded);

// The ranks of the flight records RUN_DIR holds now (flight.rank*.json; unreadable ones left out).
std::set<int> ranks_with_records(const std::string& run_dir);

}  // namespace shardtrain::launch
