// The kill-and-resume proof's plan (kill-resume-proof(1)): which rank to SIGKILL at which step, in
// which way, and whether the kill is a node loss. Drawn from a seed, or read from a file.
//
// A seeded plan of K kills in S steps on W ranks: K distinct steps drawn from [2, S-2], sorted;
// `save_kills` of them, spread evenly (kill i for i = floor((j + 0.5) K / save_kills)), wait for a
// checkpoint write in progress instead of a step; the `shrink` ones (node losses: the capacity
// drops to the listed world sizes, in order) are spread evenly among the others; each kill's rank
// is drawn from the world size running at that point. The generator is std::mt19937_64 seeded
// with the seed, so one seed gives one plan on every machine.
// A plan file: one kill per line, "RANK STEP MODE CAPACITY" (MODE step or during-save; CAPACITY
// "-" or the ranks left after a node loss); '#' starts a comment.
// Either way check_kill_plan refuses (UsageError, before any training) a plan that cannot be
// carried out: steps not increasing or not below S, a rank outside the world running then, a
// capacity not below it, or one that does not divide the global batch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardtrain::launch {

enum class KillMode { kStep, kDuringSave };
const char* kill_mode_name(KillMode m);  // "step", "during-save"

struct PlannedKill {
  int rank = 0;
  std::int64_t step = 0;         // fire once this rank has finished step - 1 (logged step + 1 >= step)
  KillMode mode = KillMode::kStep;
  std::optional<int> capacity;   // a node loss: the ranks left afterwards
  bool operator==(const PlannedKill&) const = default;
};

struct KillPlanShape {
  std::uint64_t seed = 1;
  int kills = 3, world = 2, steps = 24, save_kills = 1, global_batch = 8;
  std::vector<int> shrink;  // node losses: the world sizes after each
};

std::vector<PlannedKill> draw_kill_plan(const KillPlanShape& shape);
// `where` names the file in errors.
std::vector<PlannedKill> parse_kill_plan(const std::string& text, const std::string& where);
void check_kill_plan(const std::vector<PlannedKill>& plan, int world, int steps, int global_batch);
// "rank R at step S (MODE[, node lost: capacity C]); ..."
std::string describe_kill_plan(const std::vector<PlannedKill>& plan);

}  // namespace shardtrain::launch
