// The kill-and-resume proof (kill-resume-proof(1); contracts 5 and 6 of docs/ARCHITECTURE.md): a
// deterministic training job run straight through, then the same job under run-resilient while a
// killer SIGKILLs ranks as the plan says (kill_plan.hpp), one kill per attempt.
//
// The invariant (the verdict's first line): the resilient run's final checkpoint (parameters AND
// optimizer moments) is BITWISE the uninterrupted run's; every attempt after a mid-write kill
// resumed from the checkpoint `latest` named at the kill, never the interrupted write; every node
// loss changed the world size as planned and the restart log says so. A violation is lost
// progress: "FAIL (progress lost)".
// The count check (the second line): every planned kill fired, each in its own attempt and ending
// it, each planned mid-write kill interrupted a write, and at least one restart per kill. A
// mismatch there while the invariant holds is "FAIL (harness inconsistency, nothing lost)".
//
// judge_proof is pure (tested with made-up runs); run_kill_resume_proof does the work: the data,
// the two runs, the killer thread, the comparison (equiv layer), the report.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/launch/kill_plan.hpp"
#include "shardtrain/launch/restart_log.hpp"

namespace shardtrain::launch {

// One kill the killer made (a line of WORK/kills.jsonl).
struct FiredKill {
  int index = 0;                  // 1-based, in plan order
  int rank = 0;
  std::int64_t pid = 0;
  int attempt = 0;                // the launcher attempt it hit
  KillMode mode = KillMode::kStep;
  std::int64_t planned_step = 0, after_step = 0;
  std::optional<int> lost;        // a node loss: capacity afterwards
  std::optional<std::string> latest_at_kill;  // the checkpoint `latest` named at the kill
  std::optional<std::string> interrupted;     // during-save: the step_N whose write it hit
  std::optional<bool> write_committed;        // during-save: whether that write committed anyway
  nlohmann::json to_json() const;
  bool operator==(const FiredKill&) const = default;
};

struct ProofRun {
  int world = 2, steps = 24, kills = 0, save_kills = 0;
  std::vector<int> shrink;
  std::string origin;             // "seed 1" or "from FILE"
  int run_status = 0;             // the resilient run's exit status
  // The final checkpoints compared (only when the run finished): the equiv verdict and tensor count.
  std::optional<std::string> equiv_verdict;  // "BITWISE", "WITHIN", "DIFFERENT"; empty: not compared
  std::size_t tensors_compared = 0;
  std::string final_checkpoint;   // step_<steps>
  std::vector<FiredKill> fired;
  RestartLog restarts;
  // attempt -> the checkpoint it resumed from (the step log's checkpoint_id of its first step).
  std::vector<std::pair<int, std::string>> resumed_with;
};

struct ProofVerdict {
  std::vector<std::string> lost, held, harness, notes;
  std::string count_line;
  bool invariant_holds() const { return lost.empty(); }
  bool holds() const { return lost.empty() && harness.empty(); }
  // The report lines (invariant first, then the count check) and the closing line.
  std::string text(const ProofRun& run) const;
};

ProofVerdict judge_proof(const ProofRun& run);

struct ProofOptions {
  KillPlanShape shape;
  std::string plan_file;   // "" : draw from shape
  int ckpt_every = 3, d_model = 64;
  // A named shape (gpt2-small, ...: model/config.hpp's presets) instead of the small default
  // (2 layers, d_model above, context 32); "" : the small default. The synthetic corpus then spans
  // the preset's vocabulary, and the ranks run one thread each.
  std::string model;
  // Each step takes at least this long (a delay injected into rank 0's data phase; no effect on
  // the numbers): the killer polls every 2 ms, and a step of the tiny job takes about as long, so
  // on a loaded machine a kill could land a few steps after its planned one. 0: no pacing.
  int pace_ms = 20;
  std::string bin_dir;     // ddp-train, data-prep, run-resilient
  std::string work_dir;    // "" : a temporary folder, removed at the end
  std::string report;      // "" : none; else {"proof": "holds", ...} when the proof holds
};

// Runs the proof; returns 0 when it holds, 1 when it does not (the reason printed), and throws
// UsageError for a plan that cannot be carried out.
int run_kill_resume_proof(const ProofOptions& options);

}  // namespace shardtrain::launch
