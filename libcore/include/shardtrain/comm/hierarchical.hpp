// Topology-aware collectives (libcore `comm`): where each rank of a group runs (its node), and a
// Communicator over that group whose all-reduce, reduce-scatter and all-gather go through node-local
// and cross-node sub-groups, so that only 1/L of the bytes cross the slow link between nodes.
//
// Placement
//   A rank's node is a label: its host name (MPI_Get_processor_name / gethostname, gathered over the
//   group), or, for tests on one machine, the override SHARDTRAIN_NODE_OF_RANK: one label per world
//   rank, comma-separated, e.g. "a,a,b,b" (2 nodes x 2 ranks) or "0,0,0,1" (3 + 1). Ranks with equal
//   labels share a node; nodes are numbered in the order their first rank appears, and the ranks of
//   a node in rank order (local rank). The override must name exactly world-size labels, none
//   empty (UsageError, exit 2, otherwise). docs/ARCHITECTURE.md "Topology-aware collectives".
//
// The hierarchical all-reduce of data[0..n) over N nodes
//   * uniform nodes (L ranks each, L > 1, N > 1): with b = floor(n / L),
//       1. reduce-scatter inside the node ("node" group): local rank l gets the node's sum of
//          data[l b, (l+1) b) in a scratch shard;
//       2. all-reduce of the shard across nodes ("cross" group: the ranks of local rank l, one per
//          node, ordered by node), the group's own flat algorithm (halving/doubling or the library);
//       3. all-gather of the shards inside the node ("node-gather" group) back into data[0, L b);
//     and the tail data[L b, n) (fewer than L elements) all-reduced flat on the group itself.
//     With HierarchyOptions::pipeline_chunk_bytes the L b elements go as K chunks, each through
//     the three stages on its own (chunk k: data[L lo_k, L hi_k), lo_k = b k / K), pipelined.
//     Inter-node bytes per rank: 2 (N-1)/N x n/L, against 2 (W-1)/W x n for the flat algorithm.
//   * uneven nodes (e.g. 3 + 1): all-reduce inside the node, all-reduce across nodes among the
//     node leaders (local rank 0, "cross"), broadcast from the leader inside the node.
//   * one node, or one rank per node: the group's own flat all-reduce, unchanged.
//   Each stage is an ordinary operation of its sub-group (own sequence numbers, flight records,
//   timeouts, statistics), chained by Request::after: every stage is submitted at once, in bucket
//   order on every group, and each sub-group's communication thread starts a stage when its input is
//   ready, so consecutive buckets pipeline (bucket k+1's reduce-scatter while k crosses the nodes).
//   A stage's record stays "queued" until its input is ready (and its wait is not busy time), and
//   every stage's record (the flat tail's too) names the call it belongs to (CollectivePart: this
//   group's name and the call's number among its two-level collectives), so hang-diagnose reads a
//   rank queued behind its own earlier stage as waiting there, and names the first stage a rank
//   never joined, not the stages waiting behind it.
//   Sums: integer data gives exactly the flat result (integer addition is associative, so
//   deterministic mode's exact 64-bit sums are bitwise those of W = 1 on any topology); floating
//   point adds in another order than the flat algorithm (fast mode: equal within rounding), and
//   bitwise the same on every rank.
//
// Reduce-scatter and all-gather (ZeRO's), uniform nodes with host buffers only (else flat):
//   reduce-scatter in[W b] -> out[b]: the input permuted so that local rank l's piece holds the
//   blocks of the ranks (n, l) for every node n; reduce-scatter of W b inside the node, then of N b
//   across nodes (rank (n, l) receives block (n, l)). All-gather in[b] -> out[W b]: all-gather of b
//   across nodes, of N b inside the node, then the blocks put back in rank order when the
//   operation completes (on the thread that waits for or tests it). Scratch: W b + N b elements.
//
// Which collectives go hierarchical (HierarchyChoice): kFlat none (the group's own algorithm, as
// before), kAlways every all-reduce of at least L elements and every reduce-scatter/all-gather
// above, kBySize those of them at least `min_bytes[op]` in size (--allreduce auto with a step
// model, --step-model: the size from which the model prices the two levels cheaper than flat).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

// The nodes of a group (pure: labels in, groups out).
struct NodePlacement {
  std::vector<int> node_of_rank;   // group rank -> node index, numbered by first appearance
  std::vector<int> local_rank;     // group rank -> its rank among its node's ranks (rank order)
  std::vector<std::vector<int>> ranks_of_node;  // node -> its group ranks, in rank order
  std::vector<std::string> node_names;          // node -> its label

  int nodes() const { return int(ranks_of_node.size()); }
  int ranks() const { return int(node_of_rank.size()); }
  // Every node has the same number of ranks.
  bool uniform() const;
  // The number of ranks of every node when uniform(), else 0.
  int ranks_per_node() const { return uniform() ? int(ranks_of_node.front().size()) : 0; }
  // More than one node and some node with more than one rank: a hierarchy to exploit.
  bool hierarchical() const { return nodes() > 1 && nodes() < ranks(); }
  // "2 nodes x 2 ranks" or "2 nodes (3 + 1 ranks)" or "1 node".
  std::string describe() const;
};

// Nodes from one label per rank (index = group rank). UsageError when `labels` is empty or a label
// is "".
NodePlacement placement_from_labels(const std::vector<std::string>& labels);

// The node label of world rank `world_rank` of `world_size`: the label SHARDTRAIN_NODE_OF_RANK
// gives it when set (`override_text`, the variable's value; nullptr: unset), else `host`.
// UsageError when the override does not name exactly world_size non-empty labels.
std::string node_label(const char* override_text, int world_rank, int world_size, const std::string& host);
// The same from the environment and this process's host name (MPI_Get_processor_name's
// counterpart here: gethostname, host.hpp).
std::string node_label_of_this_rank(int world_rank, int world_size);

enum class HierarchyChoice { kFlat, kAlways, kBySize };

// kBySize's "never": an operation with this threshold stays flat at every size.
inline constexpr std::uint64_t kNeverHierarchical = ~std::uint64_t(0);

struct HierarchyOptions {
  HierarchyChoice choice = HierarchyChoice::kAlways;
  // kBySize, per CollectiveOp: the smallest call (bytes, as types.hpp counts them) to go
  // hierarchical; kNeverHierarchical keeps that operation flat. Ignored by kFlat and kAlways.
  std::array<std::uint64_t, kNumCollectiveOps> min_bytes{};
  // The buffers callers pass are host memory (reduce-scatter and all-gather permute them with
  // memcpy); false: those two stay flat (the all-reduce needs no copy and goes hierarchical).
  bool host_buffers = true;
  // Uniform nodes' all-reduce, pipelined: a call of S bytes is cut into K = min(floor(S / this),
  // kMaxPipelineChunks, n / L) chunks (at least 1), each its own reduce-scatter -> cross-node
  // all-reduce -> all-gather chain, so that chunk k+1's node stage runs while chunk k crosses the
  // nodes (without it the link between nodes idles during both node stages of a call). Each chunk
  // is a separate operation of each sub-group (K sequence numbers per level). 0: one chunk.
  std::uint64_t pipeline_chunk_bytes = 0;
};
inline constexpr int kMaxPipelineChunks = 8;

// Collective over `group`: gathers every rank's `my_label` (all_gather_strings), derives the
// placement, and, where it is hierarchical(), splits `group` into the sub-groups above (named
// "<group>.node", "<group>.node-gather", "<group>.cross"; the cross group is left out on uneven
// nodes' non-leaders). Returns a Communicator with group's ranks, name and size that runs the
// collectives above and forwards every other operation (and split) to `group`, which must outlive
// it. Its stats() are group's, with "levels" holding each sub-group's (intra-node: node and
// node-gather; inter-node: cross) and all_reduce_algorithm "hierarchical" when it is hierarchical.
std::unique_ptr<Communicator> make_hierarchical_communicator(Communicator& group, const std::string& my_label,
                                                             HierarchyOptions options = {});
// The same, the options chosen from the placement once it is known (the same on every rank: the
// placement is): --allreduce auto prices the two levels against flat on the job's own nodes.
std::unique_ptr<Communicator> make_hierarchical_communicator(
    Communicator& group, const std::string& my_label,
    const std::function<HierarchyOptions(const NodePlacement&)>& choose);

// The placement a hierarchical communicator made by make_hierarchical_communicator derived, or
// nullptr for any other communicator.
const NodePlacement* placement_of(const Communicator& comm);

}  // namespace shardtrain
