// The step model on two levels (issue 35): the price of a collective, and of a step, on N nodes of
// L ranks, flat or hierarchical (comm/hierarchical.hpp). Pure computation over step_model.hpp's
// StepModel (its intra- and inter-node links); units as there.
//
// A topology: N nodes of L ranks (W = N x L). The data-parallel collectives of a step run either
//   flat          one group of W ranks. One node: the intra link (the one-level link when intra is
//                 unknown). Several nodes: the one-level link (busbw_Bps, alpha_s), which fit takes
//                 from the sweep's flat rows: fitted on a sweep across nodes, it is the flat
//                 algorithm's measured cost on those links (how many bytes cross a node boundary
//                 depends on the algorithm and the placement: halving/doubling on node-contiguous
//                 ranks already sends only 1/L of them across, a ring or interleaved ranks more);
//   hierarchical  (comm/hierarchical.hpp) all-reduce = reduce-scatter over L ranks on intra +
//                 all-reduce of bytes / L over N ranks on inter + all-gather over L on intra;
//                 reduce-scatter = reduce-scatter over L on intra + of bytes / L over N on inter;
//                 all-gather the mirror; broadcast flat. Needs both links, and equals flat when
//                 N = 1 or L = 1;
//   auto          per collective (size), the cheaper of the two: what --allreduce auto picks.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardtrain/stepmodel/step_model.hpp"

namespace shardtrain::scaling {

struct Topology {
  int nodes = 1, ranks_per_node = 1;
  int world() const { return nodes * ranks_per_node; }
  std::string describe() const;  // "2x2"
};

enum class CommLayout { kFlat, kHierarchical, kAuto };
const char* comm_layout_name(CommLayout l);  // "flat", "hierarchical", "auto"
CommLayout parse_comm_layout(const std::string& text);  // UsageError naming --layout and the choices

// One call's predicted time on a topology, split by link, and what the layout chose for it.
struct CollectiveCost {
  double seconds = 0, intra_s = 0, inter_s = 0;
  bool hierarchical = false;
};
// UsageError when the layout is hierarchical (or auto on several nodes) and a link is unknown.
CollectiveCost collective_cost(const StepModel& model, CollectiveOp op, double bytes, const Topology& topology,
                               CommLayout layout);

// What --allreduce auto runs with a step model (ddp-train/fsdp-train --step-model): the smallest call
// size (bytes, nccl-tests size) from which `op` is priced cheaper hierarchical than flat on
// `topology` by collective_cost, and stays cheaper at every larger size. Both prices are affine in
// the size (alpha terms plus bytes over a bandwidth), so the two lines cross at most once:
//   0             hierarchical is cheaper at every size;
//   nullopt       flat is never beaten at large sizes (hierarchical's bytes term is not smaller),
//                 or there is nothing to choose (one node, one rank per node, a broadcast).
// UsageError, as collective_cost's, when a link is unknown on several nodes.
std::optional<std::uint64_t> hierarchical_from_bytes(const StepModel& model, CollectiveOp op, const Topology& topology);
// The same for every operation, indexed by CollectiveOp: the data-parallel operations' thresholds
// (all-reduce, reduce-scatter, all-gather), kNeverHierarchical (comm/hierarchical.hpp) for nullopt
// and for every other operation. What the trainers hand HierarchyOptions::min_bytes.
std::array<std::uint64_t, kNumCollectiveOps> hierarchical_thresholds(const StepModel& model, const Topology& topology);

// T on a topology and layout: as predict(), the communication priced by collective_cost; speedup
// and E against the same model at W = 1. `choices`, when given, gets one line per collective of the
// step: its size, the layout chosen, intra/inter seconds of one call.
StepTerms predict_on(const StepModel& model, const Topology& topology, CommLayout layout,
                     std::vector<std::string>* choices = nullptr);

}  // namespace shardtrain::scaling
