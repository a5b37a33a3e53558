#include "shardtrain/bench/collective_sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/bare_mpi.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/comm/types.hpp"

namespace shardtrain {
namespace {

const std::map<std::string, CollectiveOp> kOps = {{"all_reduce", CollectiveOp::kAllReduce},
                                                  {"reduce_scatter", CollectiveOp::kReduceScatter},
                                                  {"all_gather", CollectiveOp::kAllGather},
                                                  {"broadcast", CollectiveOp::kBroadcast}};

// The test pattern: small integers, so sums of up to thousands of ranks are exact in float32.
float pattern(std::size_t i) { return float(i % 13 + 1); }

// One implementation of one op at one size: fill the input, run the op, count wrong elements of
// the output. Buffers are the sweep's (large enough for the largest size).
struct Case {
  CollectiveOp op;
  int rank = 0, ranks = 1;
  std::size_t count = 0;  // float32 elements of the operation's size
  std::size_t block() const { return count / std::size_t(ranks); }

  void fill(std::vector<float>& in) const {
    const float mine = float(rank + 1);
    switch (op) {
      case CollectiveOp::kAllReduce:
      case CollectiveOp::kReduceScatter:
        for (std::size_t i = 0; i < count; ++i) in[i] = mine * pattern(i);
        break;
      case CollectiveOp::kAllGather:
        for (std::size_t i = 0; i < block(); ++i) in[i] = mine * pattern(i);
        break;
      case CollectiveOp::kBroadcast:
        for (std::size_t i = 0; i < count; ++i) in[i] = rank == 0 ? pattern(i) : 0.0f;
        break;
      default: break;
    }
  }

  // Where the result is: in place for all-reduce and broadcast, `out` otherwise.
  std::uint64_t wrong(const std::vector<float>& in, const std::vector<float>& out) const {
    const float rank_sum = float(ranks) * float(ranks + 1) / 2;
    std::uint64_t bad = 0;
    switch (op) {
      case CollectiveOp::kAllReduce:
        for (std::size_t i = 0; i < count; ++i) bad += in[i] != rank_sum * pattern(i);
        break;
      case CollectiveOp::kReduceScatter:
        for (std::size_t j = 0; j < block(); ++j) bad += out[j] != rank_sum * pattern(std::size_t(rank) * block() + j);
        break;
      case CollectiveOp::kAllGather:
        for (int q = 0; q < ranks; ++q)
          for (std::size_t j = 0; j < block(); ++j) bad += out[std::size_t(q) * block() + j] != float(q + 1) * pattern(j);
        break;
      case CollectiveOp::kBroadcast:
        for (std::size_t i = 0; i < count; ++i) bad += in[i] != pattern(i);
        break;
      default: break;
    }
    return bad;
  }
};

using RunOnce = std::function<void(std::vector<float>& in, std::vector<float>& out)>;

// The sweep's communicators: the flat ones, and on several nodes the hierarchical one and the
// two levels on their own (null on one node).
struct SweepComms {
  std::unique_ptr<Communicator> fast, canonical, hierarchical, pipelined, node, cross;
};

// The implementations of an op: (name, run once), those that exist for it.
std::vector<std::pair<std::string, RunOnce>> implementations(const Case& c, const SweepComms& comms) {
  Communicator& fast = *comms.fast;
  Communicator& canonical = *comms.canonical;
  Communicator* hierarchical = comms.hierarchical.get();
  Communicator* pipelined = comms.pipelined.get();
  std::vector<std::pair<std::string, RunOnce>> out;
  switch (c.op) {
    case CollectiveOp::kAllReduce:
      out.emplace_back("communicator-fast", [&fast, c](auto& in, auto&) { fast.all_reduce(in.data(), c.count); });
      if (hierarchical)
        out.emplace_back("hierarchical", [hierarchical, c](auto& in, auto&) { hierarchical->all_reduce(in.data(), c.count); });
      if (pipelined)
        out.emplace_back("hierarchical-pipelined", [pipelined, c](auto& in, auto&) { pipelined->all_reduce(in.data(), c.count); });
      out.emplace_back("communicator-deterministic",
                       [&canonical, c](auto& in, auto&) { canonical.all_reduce_canonical_async(in.data(), c.count).wait(); });
      out.emplace_back("mpi", [c](auto& in, auto&) { bare_mpi::all_reduce_sum(in.data(), c.count); });
      break;
    case CollectiveOp::kReduceScatter:
      out.emplace_back("communicator-fast", [&fast, c](auto& in, auto& o) { fast.reduce_scatter(in.data(), o.data(), c.block()); });
      if (hierarchical)
        out.emplace_back("hierarchical", [hierarchical, c](auto& in, auto& o) {
          hierarchical->reduce_scatter(in.data(), o.data(), c.block());
        });
      out.emplace_back("mpi", [c](auto& in, auto& o) { bare_mpi::reduce_scatter_sum(in.data(), o.data(), c.block()); });
      break;
    case CollectiveOp::kAllGather:
      out.emplace_back("communicator-fast", [&fast, c](auto& in, auto& o) { fast.all_gather(in.data(), o.data(), c.block()); });
      if (hierarchical)
        out.emplace_back("hierarchical", [hierarchical, c](auto& in, auto& o) {
          hierarchical->all_gather(in.data(), o.data(), c.block());
        });
      out.emplace_back("mpi", [c](auto& in, auto& o) { bare_mpi::all_gather(in.data(), o.data(), c.block()); });
      break;
    case CollectiveOp::kBroadcast:
      out.emplace_back("communicator-fast", [&fast, c](auto& in, auto&) { fast.broadcast(in.data(), c.count, 0); });
      out.emplace_back("mpi", [c](auto& in, auto&) { bare_mpi::broadcast(in.data(), c.count, 0); });
      break;
    default: break;
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times one implementation at one size (the slowest rank's mean), then checks one fresh run.
SweepRow measure(const Case& c, const std::string& impl, const RunOnce& run, const SweepOptions& o,
                 std::vector<float>& in, std::vector<float>& out) {
  c.fill(in);
  bare_mpi::barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < std::max(o.warmup, 1); ++i) run(in, out);
  const double warm = bare_mpi::max(seconds_since(t0) / std::max(o.warmup, 1));
  // The same count on every rank (from the slowest rank's warm-up), so the ranks stay in step.
  const int iterations = o.iterations > 0 ? o.iterations : std::clamp(int(0.2 / std::max(warm, 1e-9)), 2, 50);
  bare_mpi::barrier();
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) run(in, out);
  const double time_s = bare_mpi::max(seconds_since(t0) / iterations);
  c.fill(in);
  std::fill(out.begin(), out.begin() + std::ptrdiff_t(c.count), -1.0f);
  run(in, out);
  const std::uint64_t wrong = bare_mpi::sum(c.wrong(in, out));

  SweepRow row;
  row.op = c.op;
  row.impl = impl;
  row.ranks = c.ranks;
  row.bytes = std::uint64_t(c.count) * sizeof(float);
  row.iterations = iterations;
  row.time_s = time_s;
  row.algbw_GBps = double(row.bytes) / time_s / 1e9;
  row.busbw_GBps = bus_bandwidth(c.op, row.bytes, time_s, c.ranks) / 1e9;
  row.wrong = wrong;
  return row;
}

// An all-reduce timed on one level's groups (all of them at once). A rank outside every group of
// the level (uneven nodes' non-leaders, for inter-node) only keeps the others in step; the row is
// the slowest rank's, its size the largest group's (every group has it on uniform nodes).
SweepRow level_row(const Case& c, const std::string& impl, Communicator* group, const SweepOptions& o,
                   std::vector<float>& in, std::vector<float>& out) {
  Case level = c;
  level.rank = group ? group->rank() : 0;
  const int size = bare_mpi::max(group ? group->size() : 1);
  level.ranks = group ? group->size() : 1;
  const RunOnce run = [group, count = c.count](auto& data, auto&) {
    if (group) group->all_reduce(data.data(), count);
  };
  SweepRow row = measure(level, impl, run, o, in, out);
  row.ranks = size;
  row.busbw_GBps = bus_bandwidth(c.op, row.bytes, row.time_s, size) / 1e9;
  return row;
}

std::string format_bytes(std::uint64_t b) {
  char buf[32];
  if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(b >> 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%llu KiB", static_cast<unsigned long long>(b >> 10));
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace

void SweepOptions::validate() const {
  if (min_bytes < 4) throw UsageError("--min-bytes must be at least 4 (one float32 element)");
  if (max_bytes < min_bytes) throw UsageError("--max-bytes must be at least --min-bytes");
  if (max_bytes > (1ull << 31)) throw UsageError("--max-bytes must be at most 2 GiB (MPI counts are int)");
  if (factor < 2) throw UsageError("--factor must be at least 2");
  if (iterations < 0 || warmup < 0) throw UsageError("--iterations and --warmup must be >= 0");
  if (ops.empty()) throw UsageError("--ops names no collective");
  for (const auto& op : ops)
    if (!kOps.count(op))
      throw UsageError("--ops: '" + op + "' is not one of all_reduce, reduce_scatter, all_gather, broadcast");
}

CollectiveSweep run_collective_sweep(const SweepOptions& o) {
  o.validate();
  const int rank = bare_mpi::world_rank(), ranks = bare_mpi::world_size();
  CommOptions options;
  options.name = "sweep";
  options.timeout = std::chrono::minutes(10);
  SweepComms comms;
  comms.fast = make_mpi_communicator(MPI_COMM_WORLD, options);
  options.name = "sweep-canonical";
  comms.canonical = make_mpi_communicator(MPI_COMM_WORLD, options);
  // Several nodes (host names, or SHARDTRAIN_NODE_OF_RANK): the hierarchical all-reduce beside the
  // flat one, and each level alone, every node-local (cross-node) group running at once as in the
  // hierarchical algorithm: the intra-node and inter-node alpha and beta of the two-level model.
  comms.hierarchical = make_hierarchical_communicator(*comms.fast, node_label_of_this_rank(rank, ranks));
  const NodePlacement& placement = *placement_of(*comms.hierarchical);
  if (!placement.hierarchical()) {
    comms.hierarchical.reset();
  } else {
    const int node = placement.node_of_rank[std::size_t(rank)], local = placement.local_rank[std::size_t(rank)];
    comms.node = comms.fast->split(node, rank, "sweep.intra-node");
    comms.cross = comms.fast->split(placement.uniform() || local == 0 ? local : -1, node, "sweep.inter-node");
    if (o.hierarchical_chunk_bytes > 0) {
      HierarchyOptions pipelining;
      pipelining.pipeline_chunk_bytes = o.hierarchical_chunk_bytes;
      comms.pipelined = make_hierarchical_communicator(*comms.fast, node_label_of_this_rank(rank, ranks), pipelining);
    }
  }

  const std::size_t max_count = std::size_t(o.max_bytes / sizeof(float));
  std::vector<float> in(max_count), out(max_count);
  std::vector<SweepRow> rows;
  for (const auto& name : o.ops) {
    for (std::uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= std::uint64_t(o.factor)) {
      Case c{kOps.at(name), rank, ranks, std::size_t(bytes / sizeof(float))};
      // Reduce-scatter and all-gather need a whole block per rank.
      const bool per_rank_block = c.op == CollectiveOp::kReduceScatter || c.op == CollectiveOp::kAllGather;
      if (per_rank_block) c.count -= c.count % std::size_t(ranks);
      if (c.count == 0) continue;
      const bool canonical_ok = (ranks & (ranks - 1)) == 0;
      for (const auto& [impl, run] : implementations(c, comms)) {
        if (impl == "communicator-deterministic" && !canonical_ok) continue;  // needs a power-of-two group
        rows.push_back(measure(c, impl, run, o, in, out));
      }
      if (c.op == CollectiveOp::kAllReduce && comms.node) {
        // Each level alone: rows of the group's size, checked against the group's own sum.
        rows.push_back(level_row(c, "intra-node", comms.node.get(), o, in, out));
        rows.push_back(level_row(c, "inter-node", comms.cross.get(), o, in, out));
      }
    }
  }
  return {ranks, rows};
}

std::string sweep_table(const std::vector<SweepRow>& rows) {
  std::ostringstream s;
  std::vector<CollectiveOp> ops;
  for (const auto& r : rows)
    if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) ops.push_back(r.op);
  for (const auto& op : ops) {
    std::vector<std::string> impls;
    std::map<std::uint64_t, std::map<std::string, const SweepRow*>> by_size;
    for (const auto& r : rows) {
      if (r.op != op) continue;
      if (std::find(impls.begin(), impls.end(), r.impl) == impls.end()) impls.push_back(r.impl);
      by_size[r.bytes][r.impl] = &r;
    }
    s << "# " << op_name(op) << ", " << (rows.empty() ? 0 : rows.front().ranks)
      << " ranks: time (us) / algbw / busbw (GB/s) / #wrong per implementation; comm/mpi = busbw ratio\n";
    char cell[96];
    std::snprintf(cell, sizeof cell, "%10s", "size");
    s << cell;
    for (const auto& impl : impls) {
      std::snprintf(cell, sizeof cell, " | %-38s", impl.c_str());
      s << cell;
    }
    std::vector<std::string> hier;  // the hierarchical implementations, each with a speedup column
    for (const char* h : {"hierarchical", "hierarchical-pipelined"})
      if (std::find(impls.begin(), impls.end(), h) != impls.end()) hier.push_back(h);
    s << " | comm/mpi";
    for (const auto& h : hier) s << " | speedup (flat time / " << h << " time)";
    s << "\n";
    for (const auto& [bytes, by_impl] : by_size) {
      std::snprintf(cell, sizeof cell, "%10s", format_bytes(bytes).c_str());
      s << cell;
      for (const auto& impl : impls) {
        auto it = by_impl.find(impl);
        if (it == by_impl.end()) {
          std::snprintf(cell, sizeof cell, " | %-38s", "-");
        } else {
          const SweepRow& r = *it->second;
          std::snprintf(cell, sizeof cell, " | %10.1f %8.3f %8.3f %8llu", 1e6 * r.time_s, r.algbw_GBps, r.busbw_GBps,
                        static_cast<unsigned long long>(r.wrong));
        }
        s << cell;
      }
      auto fast = by_impl.find("communicator-fast"), mpi = by_impl.find("mpi");
      if (fast != by_impl.end() && mpi != by_impl.end() && mpi->second->busbw_GBps > 0)
        std::snprintf(cell, sizeof cell, " | %8.3f", fast->second->busbw_GBps / mpi->second->busbw_GBps);
      else
        std::snprintf(cell, sizeof cell, " | %8s", "-");
      s << cell;
      for (const auto& name : hier) {
        auto h = by_impl.find(name);
        if (fast != by_impl.end() && h != by_impl.end() && h->second->time_s > 0)
          std::snprintf(cell, sizeof cell, " | %6.2fx", fast->second->time_s / h->second->time_s);
        else
          std::snprintf(cell, sizeof cell, " | %7s", "-");
        s << cell;
      }
      s << "\n";
    }
  }
  return s.str();
}

}  // namespace shardtrain
