// The collectives sweep of `scale-bench collectives` (issue 12): nccl-tests-style timings of
// all-reduce, reduce-scatter, all-gather and broadcast over a range of sizes, through the project's
// Communicator (the fast all-reduce, and the deterministic one for all-reduce) and through bare MPI
// (the blocking MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast), with a
// correctness check per size.
//
// The rows and their file are stepmodel/sweep.hpp's (SweepRow, CollectiveSweep: the definitions of
// bytes, time, algbw, busbw), shared with the step model's fit that reads them. `wrong` counts the
// elements, over all ranks, that differ from the exact expected result of one run on fresh data
// (small integers, so every sum is exact in float32 whatever the order).
//
// Several nodes (the ranks' host names differ, or SHARDTRAIN_NODE_OF_RANK pretends so;
// comm/hierarchical.hpp): all-reduce, reduce-scatter and all-gather also run "hierarchical" (the
// hierarchical communicator over the flat one, measured in the same run as the flat rows), and the
// all-reduce is timed on each level alone: "intra-node" (every node's ranks at once, `ranks` the
// ranks per node) and "inter-node" (the cross-node groups at once, `ranks` the number of nodes),
// the two links' alpha and beta.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "shardtrain/stepmodel/sweep.hpp"

namespace shardtrain {

struct SweepOptions {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 256ull << 20;
  int factor = 2;              // each size is the previous times this (>= 2)
  std::vector<std::string> ops = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
  int iterations = 0;          // timed operations per size; 0: as many as fit ~0.2 s (2..50)
  int warmup = 1;              // untimed operations per size first
  // Several nodes, > 0: the all-reduce also runs "hierarchical-pipelined", the hierarchical one cut
  // into chunks of about this many bytes (HierarchyOptions::pipeline_chunk_bytes), in the same run.
  std::uint64_t hierarchical_chunk_bytes = 0;
  // Throws UsageError naming the bad field (sizes, factor, an unknown op name).
  void validate() const;
};

// Runs the sweep over MPI_COMM_WORLD (collective: every rank calls it with the same options; MPI
// initialised with MPI_THREAD_MULTIPLE). Every rank returns the same sweep (ranks: the world), its
// rows in sweep order; json_fields::write of the CollectiveSweep is its file (`--json`).
CollectiveSweep run_collective_sweep(const SweepOptions& options);

// One table per op, nccl-tests style: size, then time / algbw / busbw / #wrong per implementation,
// the Communicator's busbw over bare MPI's, and the flat time over each hierarchical one's.
std::string sweep_table(const std::vector<SweepRow>& rows);

}  // namespace shardtrain
