// Fault injection for tests of contract 6 of docs/ARCHITECTURE.md ("no silent hang"): make one rank fail on purpose in
// each way hang-diagnose must name. Off by default; a tool accepts it only behind an explicit
// `--inject` flag. Specs (one per --inject flag; each kind at most once):
//
//   skip-collective:rank=R,step=S[,phase=P][,group=G]
//       World rank R does not issue the first collective submitted with step S (the communicator's
//       Communicator::set_step) whose phase is P (phase.hpp names: setup, resume, data, forward,
//       backward, optimizer, step-end, ckpt, eval, finish; the phase stamped on its record) and
//       whose group is named G (Communicator::name()); phase and group are optional selectors, any
//       when left out. The collective is recorded as "skipped" and blocks that communicator's
//       queue like a rank stuck before issuing it, so its peers (and R itself) hit the collective
//       timeout: the flight records then show rank R one sequence number behind the others.
//       One collective is skipped at most, among a communicator and the groups split from it.
//   wrong-count:rank=R,step=S[,phase=P][,group=G]
//       Selected as for skip-collective, the collective is issued (and recorded) with one element
//       fewer than the caller's count: the ranks disagree on its size (the transport refuses the
//       mismatched messages, the group fails as for a timeout).
//   hang:rank=R,step=S[,phase=P]
//       World rank R sleeps forever when it enters phase P (default forward) of step S: a rank
//       stuck in compute, outside any collective, that never times out itself.
//   kill:rank=R,step=S[,phase=P]
//       World rank R kills itself with SIGKILL when it enters phase P (default forward) of step S:
//       a rank that dies without a word and without a flight record.
//   delay:rank=R,ms=M[,phase=P]
//       World rank R sleeps M milliseconds each time it enters phase P (default data: once per
//       step, before its batch): a straggler in that section. rank=all: every rank sleeps, a run
//       paced to at least M ms a step with no straggler (tests that need time between steps).
//   slow-data:rank=R,ms=M
//       The same as delay:rank=R,ms=M,phase=data: a slow data loader.
//
// R, S and M are non-negative decimal integers, G a non-empty name; keys may come in any order;
// nothing else is accepted. The phase faults (hang, kill, delay) act through the phase observer
// (phase.hpp; install_phase_faults below), the collective faults (skip, wrong count) in the
// communicator (Communicator::set_fault_injection).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/comm/phase.hpp"

namespace shardtrain {

struct FaultInjection {
  // Selects one collective: the first that world rank `rank` submits with this step, phase and group.
  struct CollectiveFault {
    int rank = 0;
    std::int64_t step = 0;
    std::optional<Phase> phase;        // none: any phase
    std::optional<std::string> group;  // none: any group
    bool selects(int world_rank, std::int64_t s, Phase p, const std::string& g) const {
      return rank == world_rank && step == s && (!phase || *phase == p) && (!group || *group == g);
    }
  };
  // Fires when world rank `rank` enters `phase` at step `step`.
  struct PhaseFault {
    int rank = 0;
    std::int64_t step = 0;
    Phase phase = Phase::kForward;
  };
  static constexpr int kEveryRank = -1;  // delay:rank=all
  struct Delay {
    int rank = 0;  // or kEveryRank
    std::int64_t ms = 0;
    Phase phase = Phase::kData;
    bool applies_to(int world_rank) const { return rank == world_rank || rank == kEveryRank; }
  };
  std::optional<CollectiveFault> skip;         // skip-collective
  std::optional<CollectiveFault> wrong_count;  // wrong-count
  std::optional<PhaseFault> hang;              // hang
  std::optional<PhaseFault> kill;              // kill
  std::optional<Delay> delay;                  // delay, slow-data

  bool any() const { return skip || wrong_count || hang || kill || delay; }

  // Parses one spec (see above) into this value. Throws UsageError naming the spec, the problem and
  // the accepted forms (unknown kind, unknown or repeated key, missing key, non-integer or negative
  // value, the same kind given twice).
  void add(const std::string& spec);

  // Parses every spec; an empty list gives the empty (inactive) value.
  static FaultInjection parse(const std::vector<std::string>& specs);

  // Throws UsageError when a rank named by a spec is not below `world_size`.
  void validate(int world_size) const;

  // "skip-collective:rank=1,step=3,phase=ckpt delay:rank=0,ms=50,phase=data", or "none".
  std::string describe() const;

  // Whether the skip-collective spec selects this collective (the first one selected is skipped).
  bool skip_selects(int world_rank, std::int64_t step, Phase phase, const std::string& group) const {
    return skip && skip->selects(world_rank, step, phase, group);
  }

  // Milliseconds `world_rank` sleeps on entering `phase` (0 when no delay applies to it).
  std::int64_t delay_ms_for(int world_rank, Phase phase) const {
    return delay && delay->applies_to(world_rank) && delay->phase == phase ? delay->ms : 0;
  }
};

// Installs the phase faults (hang, kill, delay) of `faults` that concern `world_rank` as the
// process's phase observer (phase.hpp); the returned guard removes it. Nothing is installed when
// none concerns the rank.
class PhaseFaultGuard {
 public:
  PhaseFaultGuard(const FaultInjection& faults, int world_rank);
  ~PhaseFaultGuard();
  PhaseFaultGuard(const PhaseFaultGuard&) = delete;
  PhaseFaultGuard& operator=(const PhaseFaultGuard&) = delete;

 private:
  bool installed_ = false;
};

}  // namespace shardtrain
