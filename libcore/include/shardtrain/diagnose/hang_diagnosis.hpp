// Hang diagnosis (hang-diagnose(1)): from the flight records of the ranks of one job
// (flight_dump.hpp), which collective blocked first, which ranks never joined it, what they were
// doing instead, and which rank is to blame.
//
// Contract (the analysis, in order):
//   1. Groups are matched across ranks by name and members (world_ranks: the node groups of a
//      two-level collective share a name, one group per node); entries by seq. A ring may have lost
//      old entries: the counters (last_enqueued/started/completed) still count.
//   2. Mismatches: at one group and seq, ranks that recorded a different op, numel, dtype or root,
//      or, on the stages of a two-level collective, a different count for the whole call
//      (part_of.numel).
//   3. Blocked collective of a group: the lowest seq some dumped member enqueued that not every
//      dumped member completed; a member joined it when its last_started >= seq. Across groups,
//      the one whose joiners began waiting first (t_start, else t_enqueue); the group named by a
//      timeout/error trigger wins when its time is within kCloseSeconds of that or unknown.
//      A stage of a two-level collective (entries[].part_of) that a rank holds queued behind an
//      earlier stage of the same collective is that rank waiting in the earlier stage: such blocks
//      (no joiner, every member queued behind its own stage) give way to any other block, and
//      step 4 follows a member there.
//   4. Each member that did not join: skipped it (entry state skipped), waits in another group's
//      operation (then that group's blocked collective is followed, a chain; coming back to a rank
//      already seen is a cycle), exited on an error, or is outside any collective (from `now`).
//      A member without a dump is a candidate of its own ("no dump: killed or crashed").
//   5. Verdict: a mismatch names the minority rank (strict majority), else the rank that disagrees
//      with the same collective in earlier steps (history), else ambiguous. A hang names the one
//      candidate found by 4, or is ambiguous (several candidates, a cycle). When the culprit is not
//      a member of the collective of 3 (a node stage of a two-level collective on another node), the
//      blocked collective reported is the one of its own groups it did not join, where 4 found it. Timing out does not make
//      a rank guilty: the culprit is the rank the others waited for.
//   6. No hang: nothing blocked (operations every member joined, in flight for less than the
//      collective timeout, do not count) and no timeout/error dump. When every dump is a snapshot
//      (reason signal/requested) a hang needs a rank that waited longer than min_wait_s in a
//      collective a peer has not joined. An exit dump without a hang is verdict error-exit.
//   7. The summary (Diagnosis::summary) is what programs decide on: a FailureClass, the culprit's
//      rank and host, whether the error was the whole job's (job_wide: no rank to exclude), and
//      where (group, seq, op, step, phase). Every field is typed; the evidence and explanation
//      sentences are for people and no decision reads them.
// Exit code: 0 for no-hang, 1 for every other verdict (unusable input throws, see flight_dump.hpp).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/diagnose/flight_dump.hpp"

namespace shardtrain::hang {

struct DiagnosisOptions {
  double min_wait_s = 60;  // snapshots only: a wait on a peer this long is a hang
  // An operation every member joined counts as stalled after this long; a trigger's timeout_ms
  // replaces it (the job's own --collective-timeout).
  double collective_timeout_s = 300;
};

enum class Verdict { kNoHang, kHang, kMismatch, kErrorExit, kAmbiguous };
const char* verdict_name(Verdict v);  // "no-hang", "hang", "mismatch", "error-exit", "ambiguous"

// Why a rank is to blame (JSON culprit.cause).
enum class Cause { kSkipped, kOutsideCollective, kNoDump, kMismatch, kErrorExit, kStalledTransport };
inline constexpr std::pair<const char*, Cause> kCauseNames[] = {
    {"skipped", Cause::kSkipped},     {"outside-collective", Cause::kOutsideCollective},
    {"no-dump", Cause::kNoDump},      {"mismatch", Cause::kMismatch},
    {"error-exit", Cause::kErrorExit}, {"stalled-transport", Cause::kStalledTransport}};
const char* cause_name(Cause c);

// What an operator (or the resilient launcher) does about a diagnosis: the culprit's cause named
// for the action (JSON summary.class). kAmbiguous also covers a stalled transport (every member
// joined: no rank is behind).
enum class FailureClass {
  kNoHang, kSkippedCollective, kHangOutsideCollective, kDeadRank, kMismatch, kErrorExit, kAmbiguous
};
inline constexpr std::pair<const char*, FailureClass> kFailureClassNames[] = {
    {"no-hang", FailureClass::kNoHang},
    {"skipped-collective", FailureClass::kSkippedCollective},
    {"hang-outside-collective", FailureClass::kHangOutsideCollective},
    {"dead-rank", FailureClass::kDeadRank},
    {"mismatch", FailureClass::kMismatch},
    {"error-exit", FailureClass::kErrorExit},
    {"ambiguous", FailureClass::kAmbiguous}};
const char* failure_class_name(FailureClass c);
// UsageError naming `where` for a name not in kFailureClassNames.
FailureClass parse_failure_class(const std::string& name, const std::string& where);

struct Culprit {
  int rank = -1;
  Cause cause = Cause::kNoDump;
  std::string host;  // the hostname its flight record names; "" when it left none
  // error-exit only: the ranks that exited with this same error (this one first among them), and
  // whether that makes it the whole job's error (every dumped rank that exited, and more than one:
  // a NaN loss every rank computed) rather than this rank's: then nobody is to be excluded.
  std::vector<int> same_error_ranks;
  bool job_wide = false;
  std::string error;     // error-exit: the error message of its trigger; "" otherwise
  std::string evidence;  // one sentence, for people
};

// The first collective not completed by every member.
struct BlockedCollective {
  std::string group;
  std::uint64_t seq = 0;
  std::string op, dtype, phase;  // as the joined ranks recorded it ("" when no ring holds it)
  std::uint64_t numel = 0;
  std::int64_t step = -1;
  std::vector<int> joined, not_joined, no_dump;
  std::optional<DumpPart> part_of;  // a stage of this two-level collective (as the joined ranks recorded it)
};

// What one rank was doing at its dump.
struct RankStatus {
  int rank = 0;
  bool dump = false;
  std::string reason;  // "" without a dump
  DumpNow now;
  double now_for_s = 0;  // dumped_at - now.since
  std::string doing;     // one phrase
};

struct Mismatch {
  std::string group;
  std::uint64_t seq = 0;
  std::string field;  // op, numel, dtype, root or part_of.numel
  std::map<int, nlohmann::json> values;  // world rank -> its value
  // Where it happened, as the lowest world rank that recorded it wrote it: the verdict names these
  // even when the first blocked collective is another one (a two-level collective's later stage).
  std::string op, phase;
  std::int64_t step = -1;
};

// The diagnosis in the fields a program decides on (contract 7). Unknown fields are empty.
struct DiagnosisSummary {
  FailureClass failure_class = FailureClass::kNoHang;
  std::optional<int> culprit_rank;
  std::string culprit_host;  // "" unknown
  bool job_wide = false;     // an error of the whole job: no culprit to exclude
  // Where: for a rank hung outside any collective its own phase and step, for an error exit the
  // phase and step it left in; otherwise the collective it broke (the mismatched, else the blocked one).
  std::optional<std::string> group, op, phase;
  std::optional<std::uint64_t> seq;
  std::optional<std::int64_t> step;
  // The JSON report's "summary" (base/json_record.hpp: a missing or mistyped field is named).
  static auto fields() {
    using namespace json_fields;
    using S = DiagnosisSummary;
    return std::tuple{key("class", &S::failure_class, names(kFailureClassNames)), key("culprit_rank", &S::culprit_rank),
                      key("culprit_host", &S::culprit_host, empty_as_null, kMayBeAbsent), key("job_wide", &S::job_wide),
                      key("group", &S::group), key("seq", &S::seq), key("op", &S::op), key("step", &S::step),
                      key("phase", &S::phase)};
  }
  bool operator==(const DiagnosisSummary&) const = default;
};

struct Diagnosis {
  std::string job_id;
  int world_size = 0;
  struct DumpRead {
    int rank;
    std::string file, reason;
    double dumped_at;
  };
  std::vector<DumpRead> dumps;
  std::vector<int> missing_ranks;
  Verdict verdict = Verdict::kNoHang;
  std::optional<Culprit> culprit;
  std::vector<int> candidates;  // ambiguous: the ranks it could be
  std::optional<BlockedCollective> blocked;
  std::vector<RankStatus> ranks;
  std::vector<Mismatch> mismatches;
  std::vector<std::string> explanation;  // plain sentences

  int exit_code() const { return verdict == Verdict::kNoHang ? 0 : 1; }
  DiagnosisSummary summary() const;
  // Text report: dumps, blocked collective, ranks, mismatches, verdict, culprit, explanation.
  std::string text() const;
  // JSON report, format "shardtrain-hang-diagnosis" version 2 (docs/FORMATS.md, shardtrain-hang-diagnosis(5)).
  nlohmann::json to_json() const;
};

inline constexpr double kCloseSeconds = 1.0;

Diagnosis diagnose(const DumpSet& dumps, const DiagnosisOptions& options = {});

}  // namespace shardtrain::hang
