// Where each release-rubric evidence item is found and what makes it pass. An item is a file:
// given on the command line (`--evidence ITEM=PATH`), else its default path in the training run's
// folder (the checkpoint's run folder: <step folder>/../..). A missing file is a failing item, never
// an error. docs/FORMATS.md ("Release evidence") and release-gate(1) list the same table:
//
//   item               default path                      passes when
//   deterministic_twin evidence/equivalence.json         equiv-check --json of the run against its
//                                                        deterministic twin: verdict BITWISE or WITHIN
//   kill_resume        evidence/kill-resume.json         scripts/kill-resume-proof.sh --report: "proof": "holds"
//   efficiency_report  evidence/scaling/report.json      scale-bench report of a W=1 run and the run:
//                                                        efficiency_available and a point with W > 1
//                                                        whose efficiency is a number (oversubscribed
//                                                        points count, named in the detail)
//   replica_checks     summary.json                      the run's summary: world_size >= 2,
//                                                        replica_checks.every > 0 and checks >= 1 (a
//                                                        diverged replica stops the run, so a summary
//                                                        means they matched; one rank compares nothing)
//   no_skipped_data    evidence/data-prep.json           data-prep's JSON summary: rejects.count == 0 and its
//                                                        snapshot_id is the evaluated dataset's
#pragma once
#include <map>
#include <string>
#include <vector>

#include "shardtrain/decision/policy.hpp"

namespace shardtrain {

// Where a run keeps an item's evidence, relative to the run folder. Throws UsageError naming the
// known items for an unknown one.
std::string default_evidence_path(const std::string& item);

// Checks every item of the policy's rubric. `given` maps items to paths from the command line;
// `dataset_snapshot_id` is the evaluated dataset's (no_skipped_data). Throws UsageError for an item
// the policy or --evidence names that is not a known item.
std::vector<EvidenceResult> collect_evidence(const ReleasePolicy& policy, const std::string& run_dir,
                                             const std::map<std::string, std::string>& given,
                                             const std::string& dataset_snapshot_id);

}  // namespace shardtrain
