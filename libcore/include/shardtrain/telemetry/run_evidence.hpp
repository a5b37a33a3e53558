// Where a training run's folder keeps the release evidence about it: one file per rubric item, at
// a path relative to the run folder. Written once here, below the two sides that use it: the
// release chain's stages write each file there (pipeline/), `release-gate decide` reads it from
// there unless told another path (decision/evidence.hpp, which judges each item). docs/FORMATS.md
// ("Release evidence") and release-gate(1) list the same table.
#pragma once
#include <string>

namespace shardtrain::run_evidence {

// The evidence files, relative to the run folder.
inline constexpr const char* kDataPrep = "evidence/data-prep.json";          // no_skipped_data: data-prep's summary
inline constexpr const char* kKillResume = "evidence/kill-resume.json";      // kill_resume: kill-resume-proof --report
inline constexpr const char* kEquivalence = "evidence/equivalence.json";     // deterministic_twin: equiv-check --json
inline constexpr const char* kScalingFolder = "evidence/scaling";            // scale-bench report --out
inline constexpr const char* kScalingReport = "evidence/scaling/report.json";  // efficiency_report
inline constexpr const char* kScalingReportText = "evidence/scaling/report.md";
inline constexpr const char* kRunSummary = "summary.json";                   // replica_checks: the run's own summary

// The path of rubric item `item` (deterministic_twin, kill_resume, efficiency_report,
// replica_checks, no_skipped_data), or "" for a name that is not an item.
std::string path_of_item(const std::string& item);

// The known items, comma-separated, in the table's order (for an error that names them).
std::string known_items();

}  // namespace shardtrain::run_evidence
