// Fault injection for tests of contract 6 ("no silent hang"): make one rank skip a collective or run
// slow, on purpose. Off by default; a tool accepts it only behind an explicit `--inject` flag.
//
// Specs (one per --inject flag; each kind at most once):
//   skip-collective:rank=R,step=S[,phase=P][,group=G]
//       World rank R does not issue the first collective submitted with step S (the communicator's
//       Communicator::set_step) whose phase is P (phase.hpp names: setup, resume, data, forward,
//       backward, optimizer, step-end, ckpt, eval, finish; the phase stamped on its record) and whose group
//       is named G (Communicator::name()); phase and group are optional selectors, any when left
//       out. The collective is recorded as "skipped" and blocks that communicator's queue like a
//       rank stuck before issuing it, so its peers (and R itself) hit the collective timeout: the
//       flight records then show rank R one sequence number behind the others in that group.
//       One collective is skipped at most, among a communicator and the groups split from it.
//   delay:rank=R,ms=M
//       World rank R sleeps M milliseconds in each call of Communicator::maybe_delay() (the trainer
//       calls it once per step): a straggler.
// R, S and M are non-negative decimal integers, G a non-empty name; keys may come in any order;
// nothing else is accepted.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/comm/phase.hpp"

namespace shardtrain {

struct FaultInjection {
  struct SkipCollective {
    int rank = 0;
    std::int64_t step = 0;
    std::optional<Phase> phase;        // none: any phase
    std::optional<std::string> group;  // none: any group
  };
  struct Delay {
    int rank = 0;
    std::int64_t ms = 0;
  };
  std::optional<SkipCollective> skip;
  std::optional<Delay> delay;

  bool any() const { return skip.has_value() || delay.has_value(); }

  // Parses one spec (see above) into this value. Throws UsageError naming the spec, the problem and
  // the accepted forms (unknown kind, unknown or repeated key, missing key, non-integer or negative
  // value, the same kind given twice).
  void add(const std::string& spec);

  // Parses every spec; an empty list gives the empty (inactive) value.
  static FaultInjection parse(const std::vector<std::string>& specs);

  // Throws UsageError when a rank named by a spec is not below `world_size`.
  void validate(int world_size) const;

  // "skip-collective:rank=1,step=3,phase=ckpt delay:rank=0,ms=50", or "none".
  std::string describe() const;

  // Whether the skip-collective spec selects a collective that `world_rank` submits with this
  // step and phase on the group named `group` (the first one selected is the one skipped).
  bool skip_selects(int world_rank, std::int64_t step, Phase phase, const std::string& group) const {
    return skip && skip->rank == world_rank && skip->step == step && (!skip->phase || *skip->phase == phase) &&
           (!skip->group || *skip->group == group);
  }

  // Milliseconds `world_rank` sleeps per step (0 when no delay applies to it).
  std::int64_t delay_ms_for(int world_rank) const {
    return delay && delay->rank == world_rank ? delay->ms : 0;
  }
};

}  // namespace shardtrain
