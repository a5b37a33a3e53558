// Straggler scores: which rank is slow, and in which section of the step. Pure computation over
// per-rank per-step samples (no MPI): the step loop's live check and the run summary gather the
// ranks' profiles themselves (libcore/src/train/straggler_watch.cpp); a run folder's step logs
// are read here (straggler_report_from_run_dir), for a finished run or one still running.
//
// Sections, each from the step log (telemetry.hpp), times in seconds:
//   data (data_s), forward (fwd_s), backward (bwd_s), comm_exposed (comm_exposed_s),
//   optimizer (opt_s), checkpoint (ckpt_s), and other = step_s minus those six (clamped at 0):
//   the step time no column measures -- the step-end agreement collectives (stop signal,
//   replica check) and whatever runs before the batch is asked for, among it the sleep of
//   `--inject delay:rank=R,ms=M` (the trainer calls Communicator::maybe_delay() before the
//   loader, so that delay is in no timing column; it is in step_s, hence in "other").
//
// Two scores per (rank, section), both in 0..1, 1 = not slow:
//   relative   = the fastest rank's median / this rank's median (how far behind its peers);
//   individual = this rank's best window median / its latest window median (how far behind its
//                own best): windows are `window` consecutive steps where the section ran,
//                tumbling, aligned so the latest window ends at the last step; an incomplete
//                oldest window is dropped; fewer than 2 full windows: no individual score (null).
// Medians are over the steps where the section ran (its time > 0), so a section that runs on a
// few steps only (checkpoint) is compared between its runs, not drowned by zeros.
//
// Naming rules: a (rank, section) is a straggler when a score is below `threshold` AND
//   (a) time lost is a meaningful share of the step: lost = (this rank's median - the fastest
//       rank's median) for the relative score, (latest window - best window) for the individual
//       one, times the share of steps where the section ran (a 2 s checkpoint every 100 steps
//       costs 20 ms a step), must be >= min_share x the median step (the ranks' median of their
//       median step_s). A 1 ms vs 1.5 ms optimizer scores 0.67 but costs 0.5 ms: noise on a
//       tiny section, not a straggler; only time lost slows the job, and scores of tiny sections
//       swing with scheduler noise.
//   (b) never in comm_exposed. Exposed communication is time spent waiting for the slowest rank
//       at the gradient reduction, so the healthy ranks show MORE of it than the straggler, and
//       everybody's rises when one peer slows down. Its scores are reported, never named; a
//       straggler is named in the section where it spends the time the others wait for, and the
//       report's "waited_for" names the rank the others wait for at the reduction: the rank with
//       the least exposed communication, given when the ranks' spread of exposed communication
//       (max - min of their medians) is itself a meaningful share (rule a) of the step; else null.
//   (c) checkpoint and other also hold cross-rank waits (the checkpoint commit waits for the
//       slowest writer; the step-end agreement waits for the slowest optimizer). A candidate
//       there is not named when another rank is named in a work section (data, forward,
//       backward, optimizer) with at least half its time lost: that excess is the wait for the
//       other rank. The commit also makes every rank's ckpt_s about equal to the slowest
//       writer's, so a slow writer is usually not visible in ckpt_s at all (its peers wait too).
//   Candidates held back by (a), (b) or (c) are listed under "not_named" with the reason.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"

#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain {

enum class Section { kData, kForward, kBackward, kCommExposed, kOptimizer, kCheckpoint, kOther };
inline constexpr int kNumSections = 7;
// "data", "forward", "backward", "comm_exposed", "optimizer", "checkpoint", "other".
const char* section_name(Section section);
// The step-log column of a section ("data_s", ...); "other" has none: "".
const char* section_column(Section section);
// JSON codecs (base/json_record.hpp): a section by its name ("field /x/section must be data, ...
// or other (got 'y')"), and one value per section as an object keyed by the names.
struct SectionByName {
  Section read(const JsonFile& f, const std::string& pointer) const;
  nlohmann::json write(Section s) const { return section_name(s); }
};
template <typename V>
struct BySection {
  std::array<V, kNumSections> read(const JsonFile& f, const std::string& pointer) const {
    json_fields::require_object(f, pointer);
    std::array<V, kNumSections> out{};
    for (int s = 0; s < kNumSections; ++s) out[s] = json_fields::read<V>(f, json_fields::field(pointer, section_name(Section(s))));
    return out;
  }
  nlohmann::json write(const std::array<V, kNumSections>& v) const {
    nlohmann::json out = nlohmann::json::object();
    for (int s = 0; s < kNumSections; ++s) out[section_name(Section(s))] = json_fields::write(v[s]);
    return out;
  }
};

struct StragglerOptions {
  double threshold = 0.75;  // a score below it names a straggler (subject to the rules); in (0, 1]
  int window = 10;          // steps per window of the individual score; >= 2
  double min_share = 0.05;  // rule (a): time lost must be >= this share of the median step; >= 0
  // Throws UsageError naming the bad field.
  void validate() const;
};

// One step of one rank: seconds in each section (index = Section) and the whole step.
struct StepSample {
  std::int64_t step = 0;
  std::array<double, kNumSections> section_s{};
  double step_s = 0;
};
StepSample sample_of(const StepRecord& record);
std::vector<StepSample> samples_of(const std::vector<StepRecord>& records);

// What the scores need of one rank's samples (and what a collective carries between ranks).
struct SectionProfile {
  double median_s = 0;         // median over the steps where the section ran (0 when it never ran)
  double ran_fraction = 0;     // share of the steps where it ran (time > 0)
  double best_window_s = 0;    // lowest window median (see the individual score above)
  double latest_window_s = 0;  // median of the latest window
  int windows = 0;             // full windows; the individual score needs 2
};
struct RankProfile {
  int rank = 0;
  int steps = 0;             // samples profiled
  double median_step_s = 0;  // median step_s over them
  std::array<SectionProfile, kNumSections> sections{};
};
// The profile of `samples` (one rank's, in step order) with windows of `window` steps.
RankProfile profile_of(int rank, const std::vector<StepSample>& samples, int window);

// A profile as a fixed number of doubles, for an all-gather, and back.
inline constexpr int kProfileDoubles = 3 + 5 * kNumSections;
std::array<double, kProfileDoubles> flatten(const RankProfile& profile);
RankProfile unflatten(const double* values);

// The scores of one (rank, section).
struct SectionScore {
  double median_s = 0, ran_fraction = 0;
  double relative = 1;                // the fastest rank's median / this rank's
  std::optional<double> individual;   // best window / latest window; empty with fewer than 2 windows
  double lost_s = 0;                  // relative: seconds lost per step
  double individual_lost_s = 0;       // individual: seconds lost per step
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("median_s", &SectionScore::median_s), key("ran_fraction", &SectionScore::ran_fraction),
                      key("relative", &SectionScore::relative), key("individual", &SectionScore::individual),
                      key("lost_s", &SectionScore::lost_s), key("individual_lost_s", &SectionScore::individual_lost_s)};
  }
  bool operator==(const SectionScore&) const = default;
};
struct RankScores {
  int rank = 0, steps = 0;
  double median_step_s = 0;
  std::array<SectionScore, kNumSections> sections{};  // index = Section
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("rank", &RankScores::rank), key("steps", &RankScores::steps),
                      key("median_step_s", &RankScores::median_step_s),
                      key("sections", &RankScores::sections, BySection<SectionScore>{})};
  }
  bool operator==(const RankScores&) const = default;
};
// A score below the threshold: named (why empty) or held back by a rule (why says which).
struct StragglerFinding {
  int rank = 0;
  Section section = Section::kData;
  bool individual = false;  // which score: individual, else relative
  double value = 0, lost_s = 0;
  std::string why;
  static constexpr std::pair<const char*, bool> kScoreNames[] = {{"relative", false}, {"individual", true}};
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("rank", &StragglerFinding::rank), key("section", &StragglerFinding::section, SectionByName{}),
                      key("score", &StragglerFinding::individual, names(kScoreNames)),
                      key("value", &StragglerFinding::value), key("lost_s", &StragglerFinding::lost_s),
                      key("why", &StragglerFinding::why, kOmittedWhenEmpty)};
  }
  bool operator==(const StragglerFinding&) const = default;
};
// The scores and the named stragglers of a run. JSON (the summary's "stragglers", hang-diagnose
// --stragglers --json; docs/FORMATS.md):
//   {"threshold", "window", "min_share", "median_step_s" (s),
//    "ranks": [{"rank", "steps", "median_step_s",
//               "sections": {"<section>": {"median_s", "ran_fraction", "relative", "individual"
//                                          (null: fewer than 2 windows), "lost_s" (relative, per step),
//                                          "individual_lost_s" (per step)}}}],
//    "stragglers": [{"rank", "section", "score": "relative"|"individual", "value", "lost_s"}],
//    "not_named": [{"rank", "section", "score", "value", "lost_s", "why"}],
//    "waited_for": rank or null}
// plus, for a run folder's report, "run_dir", "skipped_lines" and "skipped_records".
struct StragglerReport {
  double threshold = 0, min_share = 0, median_step_s = 0;
  int window = 0;
  std::vector<RankScores> ranks;
  std::vector<StragglerFinding> stragglers;  // named, sorted by rank, section, relative first
  std::vector<StragglerFinding> not_named;   // held back by rules a, b or c, same order
  std::optional<int> waited_for;
  std::string run_dir;                       // read_run_samples's counts, when read from a folder
  int skipped_lines = 0, skipped_records = 0;
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("threshold", &StragglerReport::threshold), key("window", &StragglerReport::window),
                      key("min_share", &StragglerReport::min_share), key("median_step_s", &StragglerReport::median_step_s),
                      key("ranks", &StragglerReport::ranks), key("stragglers", &StragglerReport::stragglers),
                      key("not_named", &StragglerReport::not_named), key("waited_for", &StragglerReport::waited_for),
                      when([](const StragglerReport& r) { return !r.run_dir.empty(); }, key("run_dir", &StragglerReport::run_dir),
                           key("skipped_lines", &StragglerReport::skipped_lines),
                           key("skipped_records", &StragglerReport::skipped_records))};
  }
  // json_fields::write and read over fields().
  nlohmann::json to_json() const { return json_fields::write(*this); }
  static StragglerReport from_json(const JsonFile& file, const std::string& at = "") {
    return json_fields::read<StragglerReport>(file, at);
  }
  bool operator==(const StragglerReport&) const = default;
};

// The scores and the named stragglers of `ranks` (one profile each, any order).
StragglerReport straggler_report(const std::vector<RankProfile>& ranks, const StragglerOptions& options);

// A run folder's step logs: RUN_DIR/steps.rank<R>.jsonl, one vector of samples per rank found
// (index = position in `ranks`, ascending), read by step_log.hpp's read_step_log under its rules:
// a line cut short (a run still writing, or killed mid-line) is counted in `skipped_lines`;
// records that are not training steps (no integer "step", or a missing timing column) in
// `skipped_records`; the last record of a step written twice wins. Throws IoError when the folder
// has no step log, UsageError for a line that is not a step log's.
struct RunSamples {
  std::vector<int> ranks;
  std::vector<std::vector<StepSample>> samples;
  int skipped_lines = 0, skipped_records = 0;
};
RunSamples read_run_samples(const std::string& run_dir);

// read_run_samples + profile_of + straggler_report; adds "run_dir", "skipped_lines" and
// "skipped_records". For `hang-diagnose --stragglers RUN_DIR`.
StragglerReport straggler_report_from_run_dir(const std::string& run_dir, const StragglerOptions& options);

// A text table of a report: one row per rank, one column per section, each cell
// "relative/individual" ("-": not scored, "*" marks a named straggler), then one line per named
// straggler, the candidates held back by rules b and c (those of rule a only counted) and
// waited_for.
std::string format_straggler_table(const StragglerReport& report);
// One line naming the stragglers of a report, e.g.
// "stragglers: rank 1 other (relative 0.08, +152 ms/step)"; "" when none is named.
std::string format_straggler_names(const StragglerReport& report);

}  // namespace shardtrain
