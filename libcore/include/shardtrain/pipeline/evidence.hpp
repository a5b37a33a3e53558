// The release evidence of a run folder, made by the tools that make each rubric item's file
// (telemetry/run_evidence.hpp says where each file goes). The command of each item is built here
// once: the release chain's stages run them one per stage (pipeline.cpp), and `pipeline evidence`
// runs the ones asked for on a run made outside the chain (the demo's two-rank run).
#pragma once
#include <string>
#include <vector>

namespace shardtrain::pipeline {

// kill-resume-proof with `proof_args` (e.g. {"--steps", "12", "--kills", "1"}), its report at
// RUN/evidence/kill-resume.json. `bin`: the folder of the tools.
std::vector<std::string> kill_resume_command(const std::string& bin, const std::string& run,
                                             const std::vector<std::string>& proof_args);

// equiv-check of `a` against `b` (parameter files or checkpoints; `equiv_args` such as
// {"--group", "tensors"}), its verdict at RUN/evidence/equivalence.json.
std::vector<std::string> equivalence_command(const std::string& bin, const std::string& run, const std::string& a,
                                             const std::string& b, const std::vector<std::string>& equiv_args);

// scale-bench report of `earlier_runs` (the W=1 baseline first) and then RUN itself, into
// RUN/evidence/scaling/.
std::vector<std::string> scaling_report_command(const std::string& bin, const std::string& run,
                                                const std::vector<std::string>& earlier_runs);

// What `pipeline evidence RUN` makes; an item left empty is not made.
struct EvidenceArgs {
  std::string run;                        // the run folder (must exist)
  std::string bin;                        // the tools' folder ("" = this program's)
  std::string data_prep;                  // data-prep's JSON summary, copied to RUN/evidence/data-prep.json
  bool scaling = false;                   // the scaling report of RUN (implied by scaling_runs)
  std::vector<std::string> scaling_runs;  // the runs before RUN in the scaling report (W=1 first)
  std::vector<std::string> twin;          // two files for equiv-check: the twin, then RUN's own
  std::string twin_args;                  // equiv-check's options, as words
  std::string proof_args;                 // kill-resume-proof's options, as words ("" with --proof: its defaults)
  bool proof = false;                     // run the kill-and-resume proof
};

// Makes each item asked for, in the rubric's order (no_skipped_data, efficiency_report,
// deterministic_twin, kill_resume), each tool's stdout kept back, one line per item on stdout:
// "ITEM: VERDICT (PATH)" (the verdict read from the file the tool wrote, "written" where it has
// none; "; TOOL exit N" added when the tool wrote it and exited non-zero, as equiv-check does on
// files that differ) or "ITEM: FAILED (TOOL exit N): the release will be judged without it". One
// item's failure does not stop the others. Returns 0 every tool exited 0, else 1. UsageError (exit 2): no item asked for, RUN
// missing, --twin not two files; IoError: the data-prep summary unreadable.
int make_evidence(const EvidenceArgs& args, const std::string& self);

}  // namespace shardtrain::pipeline
