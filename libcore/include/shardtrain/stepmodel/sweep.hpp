// The collectives sweep file (`scale-bench collectives --json`, format "shardtrain-collectives",
// man/man1/scale-bench.1): the rows bench/collective_sweep.hpp measures and the scaling layer's fit reads
// to price the links of the step model. Declared here, below both, so the writer and the reader
// share one type and its one field list (base/json_record.hpp).
//
// Definitions (nccl-tests, comm/types.hpp): `bytes` is the operation's size: the whole buffer of
// an all-reduce or broadcast, the whole W-block input of a reduce-scatter, the whole W-block output
// of an all-gather (float32 elements, bytes / 4 of them). time_s is the mean time of one operation
// over the timed iterations on the slowest rank; algbw = bytes / time_s; busbw = algbw x the op's
// bus factor (2(W-1)/W all-reduce, (W-1)/W reduce-scatter and all-gather, 1 broadcast).
// `wrong` counts the elements, over all ranks, that differ from the exact expected result.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardtrain/base/json_file.hpp"
#include "shardtrain/base/json_record.hpp"
#include "shardtrain/comm/types.hpp"

namespace shardtrain {

// "op" by op_name; an unknown name is refused naming the field ("'AllToAll' is not a collective").
struct OpByName {
  CollectiveOp read(const JsonFile& f, const std::string& pointer) const;
  nlohmann::json write(CollectiveOp op) const { return op_name(op); }
};

struct SweepRow {
  CollectiveOp op = CollectiveOp::kAllReduce;  // "op": op_name in JSON
  std::string impl;  // "communicator-fast", "communicator-deterministic", "mpi"; "hierarchical",
                     // "hierarchical-pipelined", "intra-node", "inter-node"
  int ranks = 1;     // the group's size (ranks per node for intra-node, nodes for inter-node)
  std::uint64_t bytes = 0;  // the operation's size (see above)
  int iterations = 0;
  double time_s = 0, algbw_GBps = 0, busbw_GBps = 0;
  std::uint64_t wrong = 0;

  // Every field required.
  static auto fields() {
    using namespace json_fields;
    return std::tuple{key("op", &SweepRow::op, OpByName{}), key("impl", &SweepRow::impl), key("ranks", &SweepRow::ranks),
                      key("bytes", &SweepRow::bytes), key("iterations", &SweepRow::iterations),
                      key("time_s", &SweepRow::time_s), key("algbw_GBps", &SweepRow::algbw_GBps),
                      key("busbw_GBps", &SweepRow::busbw_GBps), key("wrong", &SweepRow::wrong)};
  }
};

struct CollectiveSweep {
  int ranks = 0;  // the ranks the sweep ran on (the world)
  std::vector<SweepRow> rows;

  // The format and version checked ("... is not a collectives sweep"), every row read.
  static auto fields() {
    using namespace json_fields;
    return std::tuple{format_tag("format", "shardtrain-collectives", "collectives sweep"), version("format_version", 1),
                      key("ranks", &CollectiveSweep::ranks), key("rows", &CollectiveSweep::rows)};
  }
};
// The file through JsonFile (`what`: what it was given as, "the --collectives sweep").
CollectiveSweep read_collective_sweep(const std::string& path, const std::string& what);

}  // namespace shardtrain
