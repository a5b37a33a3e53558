// gpu-check's plan: the device proof's stages (issue 15), which part each belongs to, its time
// limit, and the rule that skips a stage whose limit no longer fits the part's budget. Pure: no
// files, no processes; the runner (gpu_check.hpp) follows it.
//
// Contract:
//   - gpu_check_plan() lists the eleven stages in the order they run: env build data gpu_tests
//     cpu_gpu_equivalence shared_gpu_2rank deterministic_bitwise resume_cross_device (part 1;
//     env and data also in part 2) bf16_vs_fp32 gpt2_124m cpu_scaling (part 2). From the device
//     bundle the build stage checks the bundle instead of building: limit 60 s instead of 300.
//   - parse_part: "1", "2" or "all"; anything else is a UsageError naming --part.
//   - parse_only: a comma-separated list of the plan's stage names; an empty list or an unknown
//     name is a UsageError naming it and the known ones.
//   - select_stages: with --only, the stages named (in plan order, whatever part); else those of
//     the part (all: every stage).
//   - fits_budget: a stage runs only when the seconds used so far plus its whole limit stay within
//     the part's budget (a stage may take its whole limit; the part must end within the budget).
//   - gpu_check_sizes: the device run's sizes, or the dry run's tiny CPU ones.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::deviceproof {

enum class Part { kOne, kTwo, kAll };
Part parse_part(const std::string& text);  // UsageError: "--part must be 1, 2 or all (got 'x')"

struct StagePlan {
  std::string name;
  std::vector<int> parts;  // 1, 2 or both
  int limit_s = 0;
  std::string what;        // what it runs and proves (--list)
  bool in(Part part) const;
};

std::vector<StagePlan> gpu_check_plan(bool from_bundle);
std::vector<std::string> parse_only(const std::string& text, const std::vector<StagePlan>& plan);
std::vector<StagePlan> select_stages(const std::vector<StagePlan>& plan, Part part,
                                     const std::vector<std::string>& only);
bool fits_budget(double used_s, int limit_s, double budget_s);
// --list's text: a heading, then "  NAME  part P  limit Ns  WHAT" a stage.
std::string plan_text(const std::vector<StagePlan>& stages, const std::string& part, bool dry,
                      const std::string& results_dir);

// The sizes of one run: the device's (dry false) or tiny CPU ones (dry true).
struct Sizes {
  std::string device, low_precision, high_precision, transport;
  int steps_short = 0, steps_bf16 = 0, warmup = 0, gpt2_steps = 0, scale_steps = 0;
  std::vector<int> scale_workers;
  std::vector<std::string> small;  // the small model's options
  std::vector<std::string> gpt2;   // GPT-2 124M's (dry: a toy of the same shape)
};
Sizes gpu_check_sizes(bool dry, int gpt2_micro_batch);

}  // namespace shardtrain::deviceproof
