#include "shardtrain/telemetry/straggler.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>

#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/error.hpp"

namespace shardtrain {
namespace {

struct SectionInfo {
  const char* name;
  const char* column;  // "" for the derived section
  bool holds_wait;     // rule (c): the section holds a cross-rank wait besides this rank's work
};
// Index = Section.
constexpr SectionInfo kSections[kNumSections] = {
    {"data", "data_s", false},         {"forward", "fwd_s", false},   {"backward", "bwd_s", false},
    {"comm_exposed", "comm_exposed_s", true}, {"optimizer", "opt_s", false}, {"checkpoint", "ckpt_s", true},
    {"other", "", true},
};
constexpr int kMeasuredSections = kNumSections - 1;  // all but "other"

bool is_work_section(int s) { return !kSections[s].holds_wait; }

double median_of(std::vector<double> values) { return SeriesStats::of(std::move(values)).median; }

// Tumbling windows of `window` values aligned to the end: sets best, latest and count.
void fill_windows(const std::vector<double>& ran, int window, SectionProfile& out) {
  const std::size_t w = std::size_t(window), n = ran.size();
  out.windows = int(n / w);
  for (int i = 0; i < out.windows; ++i) {
    const auto end = ran.begin() + std::ptrdiff_t(n - std::size_t(i) * w);
    const double m = median_of(std::vector<double>(end - std::ptrdiff_t(w), end));
    if (i == 0) out.latest_window_s = out.best_window_s = m;
    out.best_window_s = std::min(out.best_window_s, m);
  }
}

// One (rank, section) score below the threshold, before the naming rules.
struct Candidate {
  int rank = 0;
  int section = 0;
  bool individual = false;
  double value = 0, lost_s = 0;
  std::string why;  // empty: named
  StragglerFinding finding() const { return {rank, Section(section), individual, value, lost_s, why}; }
};

// The scores of one rank's section against the fastest rank's median.
struct Scores {
  double relative = 1, lost_s = 0;
  std::optional<double> individual;
  double individual_lost_s = 0;
};
Scores scores_of(const SectionProfile& p, double fastest_median_s) {
  Scores s;
  if (p.median_s > 0 && fastest_median_s > 0) {
    s.relative = fastest_median_s / p.median_s;
    s.lost_s = (p.median_s - fastest_median_s) * p.ran_fraction;
  }
  if (p.windows >= 2 && p.latest_window_s > 0) {
    s.individual = p.best_window_s / p.latest_window_s;
    s.individual_lost_s = (p.latest_window_s - p.best_window_s) * p.ran_fraction;
  }
  return s;
}

// The lowest median of a section over the ranks where it ran (0 when it ran nowhere).
double fastest_median(const std::vector<RankProfile>& ranks, int s) {
  double fastest = 0;
  for (const RankProfile& r : ranks) {
    const double m = r.sections[s].median_s;
    if (m > 0 && (fastest == 0 || m < fastest)) fastest = m;
  }
  return fastest;
}

// The reference step: the ranks' median of their median step (ranks with steps only).
double reference_step_s(const std::vector<RankProfile>& ranks) {
  std::vector<double> steps;
  for (const RankProfile& r : ranks)
    if (r.steps > 0) steps.push_back(r.median_step_s);
  return median_of(steps);
}

// Rules (a) and (b): sets why for a candidate that is noise or exposed communication.
void apply_share_and_comm_rules(Candidate& c, double floor_s, double min_share) {
  char why[160];
  if (c.lost_s < floor_s) {
    std::snprintf(why, sizeof(why), "rule a: %.1f ms/step lost, under %.0f%% of the median step (%.1f ms)",
                  1e3 * c.lost_s, 100 * min_share, 1e3 * floor_s);
    c.why = why;
  } else if (c.section == int(Section::kCommExposed)) {
    c.why = "rule b: exposed communication is waiting for the slowest rank, never named";
  }
}

// Rule (c): a candidate in a section holding a cross-rank wait, explained by another rank named in
// a work section with at least half its time lost.
void apply_wait_rule(Candidate& c, const std::vector<Candidate>& all) {
  if (!c.why.empty() || is_work_section(c.section)) return;
  for (const Candidate& other : all) {
    if (other.rank == c.rank || !other.why.empty() || !is_work_section(other.section)) continue;
    if (other.lost_s >= 0.5 * c.lost_s) {
      c.why = std::string("rule c: the wait for rank ") + std::to_string(other.rank) + " (named in " +
              kSections[other.section].name + ")";
      return;
    }
  }
}

// Rule (b)'s pointer: the rank with the least exposed communication when the spread is meaningful.
std::optional<int> waited_for(const std::vector<RankProfile>& ranks, double floor_s) {
  constexpr int kComm = int(Section::kCommExposed);
  if (ranks.size() < 2) return std::nullopt;
  auto by_exposed = [](const RankProfile& a, const RankProfile& b) {
    return a.sections[kComm].median_s < b.sections[kComm].median_s;
  };
  const auto [least, most] = std::minmax_element(ranks.begin(), ranks.end(), by_exposed);
  const double spread = most->sections[kComm].median_s - least->sections[kComm].median_s;
  if (spread <= 0 || spread < floor_s) return std::nullopt;
  return least->rank;
}

bool sort_order(const Candidate& a, const Candidate& b) {
  if (a.rank != b.rank) return a.rank < b.rank;
  if (a.section != b.section) return a.section < b.section;
  return !a.individual && b.individual;
}

std::string fixed(double value, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

}  // namespace

const char* section_name(Section section) { return kSections[int(section)].name; }

Section SectionByName::read(const JsonFile& f, const std::string& pointer) const {
  const std::string name = f.string(pointer);
  const char* all[kNumSections];
  for (int s = 0; s < kNumSections; ++s) {
    if (name == kSections[s].name) return Section(s);
    all[s] = kSections[s].name;
  }
  f.fail("field " + pointer + " must be " + json_fields::choices(all, kNumSections) + " (got '" + name + "')");
}
const char* section_column(Section section) { return kSections[int(section)].column; }

void StragglerOptions::validate() const {
  if (!(threshold > 0 && threshold <= 1))
    throw UsageError("straggler threshold must be in (0, 1] (got " + std::to_string(threshold) + ")");
  if (window < 2) throw UsageError("straggler window must be at least 2 steps (got " + std::to_string(window) + ")");
  if (!(min_share >= 0)) throw UsageError("straggler min_share must be >= 0");
}

StepSample sample_of(const StepRecord& record) {
  StepSample s;
  s.step = record.step;
  s.step_s = record.step_s;
  const double StepRecord::*fields[kMeasuredSections] = {&StepRecord::data_s,         &StepRecord::fwd_s,
                                                          &StepRecord::bwd_s,          &StepRecord::comm_exposed_s,
                                                          &StepRecord::opt_s,          &StepRecord::ckpt_s};
  double measured = 0;
  for (int i = 0; i < kMeasuredSections; ++i) measured += s.section_s[i] = record.*fields[i];
  const double other = record.step_s - measured;  // rounding leaves ~1e-17 where nothing else ran
  s.section_s[int(Section::kOther)] = other > 1e-9 ? other : 0.0;
  return s;
}

std::vector<StepSample> samples_of(const std::vector<StepRecord>& records) {
  std::vector<StepSample> out;
  out.reserve(records.size());
  for (const StepRecord& r : records) out.push_back(sample_of(r));
  return out;
}

RankProfile profile_of(int rank, const std::vector<StepSample>& samples, int window) {
  RankProfile p;
  p.rank = rank;
  p.steps = int(samples.size());
  std::vector<double> steps;
  for (const StepSample& s : samples) steps.push_back(s.step_s);
  p.median_step_s = median_of(steps);
  for (int sec = 0; sec < kNumSections; ++sec) {
    std::vector<double> ran;  // the section's times on the steps where it ran, in step order
    for (const StepSample& s : samples)
      if (s.section_s[sec] > 0) ran.push_back(s.section_s[sec]);
    SectionProfile& out = p.sections[sec];
    out.median_s = median_of(ran);
    out.ran_fraction = samples.empty() ? 0.0 : double(ran.size()) / double(samples.size());
    fill_windows(ran, window, out);
  }
  return p;
}

std::array<double, kProfileDoubles> flatten(const RankProfile& p) {
  std::array<double, kProfileDoubles> v{};
  v[0] = p.rank;
  v[1] = p.steps;
  v[2] = p.median_step_s;
  for (int s = 0; s < kNumSections; ++s) {
    const SectionProfile& sp = p.sections[s];
    double* out = &v[3 + 5 * s];
    out[0] = sp.median_s;
    out[1] = sp.ran_fraction;
    out[2] = sp.best_window_s;
    out[3] = sp.latest_window_s;
    out[4] = sp.windows;
  }
  return v;
}

RankProfile unflatten(const double* v) {
  RankProfile p;
  p.rank = int(v[0]);
  p.steps = int(v[1]);
  p.median_step_s = v[2];
  for (int s = 0; s < kNumSections; ++s) {
    const double* in = v + 3 + 5 * s;
    p.sections[s] = SectionProfile{in[0], in[1], in[2], in[3], int(in[4])};
  }
  return p;
}

StragglerReport straggler_report(const std::vector<RankProfile>& ranks, const StragglerOptions& options) {
  options.validate();
  StragglerReport report;
  report.threshold = options.threshold;
  report.window = options.window;
  report.min_share = options.min_share;
  report.median_step_s = reference_step_s(ranks);
  const double floor_s = options.min_share * report.median_step_s;
  std::array<double, kNumSections> fastest{};
  for (int s = 0; s < kNumSections; ++s) fastest[s] = fastest_median(ranks, s);

  std::vector<Candidate> candidates;
  for (const RankProfile& r : ranks) {
    RankScores row{r.rank, r.steps, r.median_step_s, {}};
    for (int s = 0; s < kNumSections; ++s) {
      const SectionProfile& p = r.sections[s];
      const Scores sc = scores_of(p, fastest[s]);
      row.sections[s] = {p.median_s, p.ran_fraction, sc.relative, sc.individual, sc.lost_s, sc.individual_lost_s};
      if (sc.relative < options.threshold) candidates.push_back({r.rank, s, false, sc.relative, sc.lost_s, ""});
      if (sc.individual && *sc.individual < options.threshold)
        candidates.push_back({r.rank, s, true, *sc.individual, sc.individual_lost_s, ""});
    }
    report.ranks.push_back(row);
  }
  for (Candidate& c : candidates) apply_share_and_comm_rules(c, floor_s, options.min_share);
  for (Candidate& c : candidates) apply_wait_rule(c, candidates);
  std::sort(candidates.begin(), candidates.end(), sort_order);
  for (const Candidate& c : candidates) (c.why.empty() ? report.stragglers : report.not_named).push_back(c.finding());
  report.waited_for = waited_for(ranks, floor_s);
  return report;
}

RunSamples read_run_samples(const std::string& run_dir) {
  const std::map<int, std::string> logs = find_step_logs(run_dir);
  if (logs.empty()) throw IoError(run_dir + ": no step log (steps.rank<R>.jsonl) in this folder; is it a run folder?");
  RunSamples out;
  for (const auto& [rank, path] : logs) {
    // The one step-log reader (step_log.hpp); a record without the timing columns is not scored.
    const StepLogContents log = read_step_log(path);
    std::vector<StepSample> samples;
    for (const StepLogEntry& e : log.steps) {
      if (e.has_timings) samples.push_back(sample_of(e.record));
      else ++out.skipped_records;
    }
    out.ranks.push_back(rank);
    out.samples.push_back(std::move(samples));
    out.skipped_lines += log.torn_lines;
    out.skipped_records += log.other_records;
  }
  return out;
}

StragglerReport straggler_report_from_run_dir(const std::string& run_dir, const StragglerOptions& options) {
  options.validate();
  const RunSamples run = read_run_samples(run_dir);
  std::vector<RankProfile> profiles;
  for (std::size_t i = 0; i < run.ranks.size(); ++i)
    profiles.push_back(profile_of(run.ranks[i], run.samples[i], options.window));
  StragglerReport report = straggler_report(profiles, options);
  report.run_dir = run_dir;
  report.skipped_lines = run.skipped_lines;
  report.skipped_records = run.skipped_records;
  return report;
}

std::string format_straggler_table(const StragglerReport& report) {
  std::string out = "straggler scores, relative/individual (threshold " + fixed(report.threshold, "%.2f") +
                    ", window " + std::to_string(report.window) + " steps, median step " +
                    fixed(1e3 * report.median_step_s, "%.1f") + " ms; * = straggler)\n";
  char cell[64];
  std::snprintf(cell, sizeof(cell), "%-6s", "rank");
  out += cell;
  for (const SectionInfo& s : kSections) {
    std::snprintf(cell, sizeof(cell), " %13s", s.name);
    out += cell;
  }
  out += "\n";
  for (const RankScores& row : report.ranks) {
    std::snprintf(cell, sizeof(cell), "%-6d", row.rank);
    out += cell;
    for (int s = 0; s < kNumSections; ++s) {
      const SectionScore& sec = row.sections[s];
      bool named = false;
      for (const StragglerFinding& n : report.stragglers) named = named || (n.rank == row.rank && int(n.section) == s);
      const std::string individual = sec.individual ? fixed(*sec.individual, "%.2f") : "-";
      const std::string text = fixed(sec.relative, "%.2f") + "/" + individual + (named ? "*" : "");
      std::snprintf(cell, sizeof(cell), " %13s", text.c_str());
      out += cell;
    }
    out += "\n";
  }
  auto describe = [](const StragglerFinding& c) {
    return "rank " + std::to_string(c.rank) + " " + kSections[int(c.section)].name + ": " +
           (c.individual ? "individual" : "relative") + " " + fixed(c.value, "%.2f") + ", " +
           fixed(1e3 * c.lost_s, "%+.1f") + " ms/step";
  };
  for (const StragglerFinding& c : report.stragglers) out += "straggler: " + describe(c) + "\n";
  if (report.stragglers.empty()) out += "no stragglers\n";
  int noise = 0;  // rule a: counted, not listed (on a healthy run most low scores are tiny sections)
  for (const StragglerFinding& c : report.not_named) {
    if (c.why.rfind("rule a", 0) == 0) ++noise;
    else out += "not named: " + describe(c) + " (" + c.why + ")\n";
  }
  if (noise > 0)
    out += "not named: " + std::to_string(noise) + " low score" + (noise == 1 ? "" : "s") + " losing under " +
           fixed(100 * report.min_share, "%.0f") + "% of the median step (rule a; listed in not_named)\n";
  if (report.waited_for)
    out += "waited for at the gradient reduction: rank " + std::to_string(*report.waited_for) + "\n";
  return out;
}

std::string format_straggler_names(const StragglerReport& report) {
  std::string out;
  for (const StragglerFinding& c : report.stragglers) {
    out += out.empty() ? "stragglers: " : "; ";
    out += "rank " + std::to_string(c.rank) + " " + kSections[int(c.section)].name + " (" +
           (c.individual ? "individual" : "relative") + " " + fixed(c.value, "%.2f") + ", " +
           fixed(1e3 * c.lost_s, "%+.0f") + " ms/step)";
  }
  return out;
}

}  // namespace shardtrain
