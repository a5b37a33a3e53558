// The kill plan: drawn from a seed or read from a file, then checked (kill_plan.hpp).
#include "shardtrain/launch/kill_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "shardtrain/base/error.hpp"

namespace shardtrain::launch {

const char* kill_mode_name(KillMode m) { return m == KillMode::kDuringSave ? "during-save" : "step"; }

std::vector<PlannedKill> draw_kill_plan(const KillPlanShape& s) {
  const int shrinks = int(s.shrink.size());
  if (s.kills < s.save_kills + shrinks || s.kills > s.steps - 3 || s.kills < 1)
    throw UsageError(std::to_string(s.kills) + " kills cannot hold " + std::to_string(s.save_kills) +
                     " save kills and " + std::to_string(shrinks) + " node losses in " + std::to_string(s.steps) +
                     " steps");
  std::mt19937_64 rng(s.seed);
  std::vector<std::int64_t> candidates(std::size_t(s.steps - 3));
  std::iota(candidates.begin(), candidates.end(), 2);  // steps 2 .. steps-2
  std::shuffle(candidates.begin(), candidates.end(), rng);
  std::vector<std::int64_t> points(candidates.begin(), candidates.begin() + s.kills);
  std::sort(points.begin(), points.end());
  std::set<int> save_at;
  for (int j = 0; j < s.save_kills; ++j) save_at.insert(int(std::floor((j + 0.5) * s.kills / s.save_kills)));
  std::vector<int> others;
  for (int i = 0; i < s.kills; ++i)
    if (!save_at.count(i)) others.push_back(i);
  std::map<int, int> lost_at;  // kill index -> capacity after it
  for (int j = 0; j < shrinks; ++j) {
    const int k = int(std::floor((j + 1.0) * double(others.size()) / (shrinks + 1)));
    lost_at[others.at(std::size_t(std::max(k - 1, 0)))] = s.shrink[std::size_t(j)];
  }
  if (int(lost_at.size()) != shrinks)
    throw UsageError(std::to_string(s.kills) + " kills are too few to place " + std::to_string(shrinks) +
                     " node losses apart");
  std::vector<PlannedKill> plan;
  int world = s.world;
  for (int i = 0; i < s.kills; ++i) {
    PlannedKill k;
    k.rank = int(rng() % std::uint64_t(world));
    k.step = points[std::size_t(i)];
    k.mode = save_at.count(i) ? KillMode::kDuringSave : KillMode::kStep;
    if (const auto l = lost_at.find(i); l != lost_at.end()) {
      k.capacity = l->second;
      world = l->second;
    }
    plan.push_back(k);
  }
  return plan;
}

std::vector<PlannedKill> parse_kill_plan(const std::string& text, const std::string& where) {
  std::vector<PlannedKill> plan;
  std::istringstream in(text);
  int n = 0;
  auto whole = [](const std::string& w) { return !w.empty() && std::all_of(w.begin(), w.end(), ::isdigit); };
  for (std::string raw; std::getline(in, raw);) {
    ++n;
    std::istringstream words(raw.substr(0, raw.find('#')));
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    if (w.size() != 4 || !whole(w[0]) || !whole(w[1]) || (w[2] != "step" && w[2] != "during-save") ||
        !(w[3] == "-" || whole(w[3])))
      throw UsageError(where + " line " + std::to_string(n) + ": expected 'RANK STEP step|during-save -|CAPACITY', got '" +
                       raw + "'");
    PlannedKill k;
    k.rank = std::stoi(w[0]);
    k.step = std::stoll(w[1]);
    k.mode = w[2] == "step" ? KillMode::kStep : KillMode::kDuringSave;
    if (w[3] != "-") k.capacity = std::stoi(w[3]);
    plan.push_back(k);
  }
  if (plan.empty()) throw UsageError(where + ": no kills in it");
  return plan;
}

void check_kill_plan(const std::vector<PlannedKill>& plan, int world, int steps, int global_batch) {
  std::int64_t last = 0;
  for (const auto& k : plan) {
    const std::string at = "the kill at step " + std::to_string(k.step);
    if (k.rank >= world)
      throw UsageError("the kill of rank " + std::to_string(k.rank) + " at step " + std::to_string(k.step) + ": only " +
                       std::to_string(world) + " ranks run then");
    if (!(last < k.step && k.step < steps))
      throw UsageError(at + ": steps must increase and stay below --steps " + std::to_string(steps));
    if (k.capacity && !(1 <= *k.capacity && *k.capacity < world))
      throw UsageError("the node loss at step " + std::to_string(k.step) + ": capacity " + std::to_string(*k.capacity) +
                       " must be below the " + std::to_string(world) + " ranks running then");
    if (k.capacity && global_batch % *k.capacity)
      throw UsageError("the node loss at step " + std::to_string(k.step) + ": capacity " + std::to_string(*k.capacity) +
                       " does not divide --global-batch " + std::to_string(global_batch) +
                       " (the launcher would pick another world size)");
    if (k.capacity) world = *k.capacity;
    last = k.step;
  }
}

std::string describe_kill_plan(const std::vector<PlannedKill>& plan) {
  std::string out;
  for (const auto& k : plan)
    out += "rank " + std::to_string(k.rank) + " at step " + std::to_string(k.step) + " (" + kill_mode_name(k.mode) +
           (k.capacity ? ", node lost: capacity " + std::to_string(*k.capacity) : "") + "); ";
  return out;
}

}  // namespace shardtrain::launch
