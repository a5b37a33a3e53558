// The kill-and-resume proof: its verdict (pure) and its run (kill_resume_proof.hpp).
#include "shardtrain/launch/kill_resume_proof.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "shardtrain/base/durable_file.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/base/json_fields.hpp"
#include "shardtrain/base/subprocess.hpp"
#include "shardtrain/base/time.hpp"
#include "shardtrain/equiv/equivalence.hpp"
#include "shardtrain/telemetry/step_log.hpp"

namespace shardtrain::launch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string list_text(const std::vector<int>& xs) {
  std::string out;
  for (int x : xs) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return "[" + out + "]";
}

std::string world_path(int start, const std::vector<int>& path) {
  std::string out = std::to_string(start);
  for (int w : path) out += " -> " + std::to_string(w);
  return out;
}

const RestartRecord* restart_of(const RestartLog& log, int attempt) {
  for (const auto& r : log.restarts)
    if (r.attempt == attempt) return &r;
  return nullptr;
}

std::optional<std::string> resumed_with(const ProofRun& run, int attempt) {
  for (const auto& [a, ckpt] : run.resumed_with)
    if (a == attempt) return ckpt;
  return std::nullopt;
}

// The kills during a save, by what became of the write they were in.
struct SaveKills {
  std::vector<const FiredKill*> mid_write;  // the write was interrupted
  std::vector<const FiredKill*> late;       // the write committed anyway
};

SaveKills save_kills(const std::vector<FiredKill>& fired) {
  SaveKills out;
  for (const auto& k : fired) {
    if (k.write_committed == std::optional<bool>(false)) out.mid_write.push_back(&k);
    if (k.write_committed == std::optional<bool>(true)) out.late.push_back(&k);
  }
  return out;
}

void judge_final_checkpoint(const ProofRun& run, ProofVerdict& v) {
  const std::string& final_ckpt = run.final_checkpoint;
  if (run.run_status != 0) {
    v.lost.push_back("the resilient run did not finish (exit " + std::to_string(run.run_status) + ")");
  } else if (run.equiv_verdict != std::optional<std::string>("BITWISE")) {
    v.lost.push_back("final " + final_ckpt + " is not BITWISE equal to the uninterrupted run's (" +
                     (run.equiv_verdict ? "verdict: " + *run.equiv_verdict : std::string("not compared")) + ")");
  } else {
    v.held.push_back("final " + final_ckpt + " (parameters and optimizer moments, " +
                     std::to_string(run.tensors_compared) + " tensors) BITWISE equal to the uninterrupted run");
  }
}

void judge_mid_write_resumes(const ProofRun& run, const std::vector<const FiredKill*>& mid_write, ProofVerdict& v) {
  std::vector<std::string> notes;
  for (const FiredKill* k : mid_write) {
    const int next = k->attempt + 1;
    const std::optional<std::string> used = resumed_with(run, next);
    const std::string interrupted = k->interrupted.value_or("?");
    if (!used && !k->latest_at_kill) {
      notes.push_back(interrupted + " -> attempt " + std::to_string(next) + " started fresh (no checkpoint before it)");
    } else if (!used) {
      v.lost.push_back("attempt " + std::to_string(next) + ", after the kill during the write of " + interrupted +
                       ", did not resume from a checkpoint");
    } else if (*used == interrupted) {
      v.lost.push_back("attempt " + std::to_string(next) + " resumed from the interrupted " + interrupted);
    } else if (used != k->latest_at_kill) {
      v.lost.push_back("attempt " + std::to_string(next) + " resumed from " + *used +
                       ", not the previous valid checkpoint " + k->latest_at_kill.value_or("(none)") +
                       " (the kill interrupted " + interrupted + ")");
    } else {
      notes.push_back(interrupted + " -> attempt " + std::to_string(next) + " used " + *used);
    }
  }
  if (!mid_write.empty() && notes.size() == mid_write.size())
    v.held.push_back(std::to_string(mid_write.size()) +
                     " mid-write kills, each resumed from the previous valid checkpoint (" + join(notes, "; ") + ")");
  v.notes = notes;
}

void judge_world_sizes(const ProofRun& run, ProofVerdict& v) {
  std::vector<int> path;
  for (const auto& r : run.restarts.restarts)
    if (r.world && r.world->world_size != r.world->previous_world_size) path.push_back(r.world->world_size);
  std::string unlogged;
  for (const auto& k : run.fired) {
    if (!k.lost) continue;
    const RestartRecord* r = restart_of(run.restarts, k.attempt + 1);
    if (!r || !r->world || r->world->world_size != *k.lost)
      unlogged += "; the node loss in attempt " + std::to_string(k.attempt) + " (capacity " + std::to_string(*k.lost) +
                  ") is not logged by restart " + std::to_string(k.attempt + 1);
  }
  const bool prefix = path.size() <= run.shrink.size() && std::equal(path.begin(), path.end(), run.shrink.begin());
  if (!prefix || !unlogged.empty() || (run.run_status == 0 && path != run.shrink))
    v.lost.push_back("world sizes changed to " + list_text(path) + ", planned " + list_text(run.shrink) + unlogged);
  else
    v.held.push_back("world size " + world_path(run.world, path) + ", each change logged in restarts.json");
}

void check_counts(const ProofRun& run, const SaveKills& save, ProofVerdict& v) {
  std::set<int> attempts;
  std::vector<int> attempt_list;
  for (const auto& k : run.fired) {
    attempts.insert(k.attempt);
    attempt_list.push_back(k.attempt);
  }
  if (int(run.fired.size()) != run.kills)
    v.harness.push_back(std::to_string(run.fired.size()) + " of " + std::to_string(run.kills) +
                        " planned kills fired (see killer.log)");
  if (attempts.size() != run.fired.size())
    v.harness.push_back("two kills hit one attempt (attempts " + list_text(attempt_list) + ")");
  std::vector<std::string> not_ending;
  for (const auto& k : run.fired) {
    const RestartRecord* r = restart_of(run.restarts, k.attempt + 1);
    if (!r || r->previous_exit_status == 0)
      not_ending.push_back("kill " + std::to_string(k.index) + " (attempt " + std::to_string(k.attempt) + ")");
  }
  if (!not_ending.empty()) v.harness.push_back("kills that did not end their attempt: " + join(not_ending, ", "));
  if (!save.late.empty()) {
    std::vector<std::string> names;
    for (const FiredKill* k : save.late)
      names.push_back(k->interrupted.value_or("?") + " (kill " + std::to_string(k->index) + ")");
    v.harness.push_back("planned mid-write kills whose write committed anyway: " + join(names, ", "));
  }
  const auto during_save = std::count_if(run.fired.begin(), run.fired.end(),
                                         [](const FiredKill& k) { return k.mode == KillMode::kDuringSave; });
  if (int(save.mid_write.size() + save.late.size()) != run.save_kills || during_save != run.save_kills)
    v.harness.push_back(std::to_string(save.mid_write.size()) + " kills interrupted a write, planned " +
                        std::to_string(run.save_kills));
  const std::size_t restarts = run.restarts.restarts.size();
  if (restarts < run.fired.size())
    v.harness.push_back("only " + std::to_string(restarts) + " restarts for " + std::to_string(run.fired.size()) +
                        " kills, each in its own attempt");
  const long unplanned = long(restarts) - long(run.fired.size() - not_ending.size());
  v.count_line = std::to_string(run.fired.size()) + " of " + std::to_string(run.kills) + " planned kills fired, in " +
                 std::to_string(attempts.size()) + " distinct attempts; " + std::to_string(restarts) + " restarts" +
                 (unplanned > 0 ? " (" + std::to_string(unplanned) + " not caused by a planned kill)" : "");
}

}  // namespace

json FiredKill::to_json() const {
  using json_fields::or_null;
  json j = {{"index", index},
            {"rank", rank},
            {"pid", pid},
            {"attempt", attempt},
            {"mode", kill_mode_name(mode)},
            {"planned_step", planned_step},
            {"after_step", after_step},
            {"lost", or_null(lost)},
            {"latest_at_kill", or_null(latest_at_kill)},
            {"interrupted", or_null(interrupted)}};
  if (write_committed) j["outcome"] = *write_committed ? "committed anyway" : "write interrupted";
  return j;
}

ProofVerdict judge_proof(const ProofRun& run) {
  ProofVerdict v;
  // The invariant.
  judge_final_checkpoint(run, v);
  const SaveKills save = save_kills(run.fired);
  judge_mid_write_resumes(run, save.mid_write, v);
  if (!run.shrink.empty()) judge_world_sizes(run, v);
  // The count check.
  check_counts(run, save, v);
  return v;
}

std::string ProofVerdict::text(const ProofRun& run) const {
  std::ostringstream o;
  const std::string me = "kill-resume-proof: ";
  if (!lost.empty()) {
    o << me << "invariant: VIOLATED -- progress lost\n";
    for (const auto& s : lost) o << "  LOST: " << s << "\n";
    for (const auto& s : held) o << "  holds: " << s << "\n";
  } else {
    o << me << "invariant: HOLDS\n";
    for (const auto& s : held) o << "  " << s << "\n";
  }
  o << me << "count check (" << run.origin << ", one kill per attempt): " << count_line << ": "
    << (harness.empty() ? "consistent" : "INCONSISTENT") << "\n";
  for (const auto& s : harness) o << "  harness: " << s << "\n";
  if (holds()) {
    std::size_t mid = 0;
    for (const auto& k : run.fired) mid += k.write_committed == std::optional<bool>(false);
    o << me << "PROOF HOLDS: " << run.final_checkpoint << " BITWISE; " << run.restarts.restarts.size()
      << " restarts for " << run.fired.size() << " kills (" << mid << " mid-write"
      << (run.shrink.empty() ? "" : ", world size " + world_path(run.world, run.shrink)) << ")\n";
  }
  return o.str();
}

}  // namespace shardtrain::launch
