// Topology-aware collectives (hierarchical.hpp): the placement of ranks on nodes, and the
// hierarchical communicator that chains node-local and cross-node stages with Request::after.
#include "shardtrain/comm/hierarchical.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "shardtrain/base/host.hpp"
#include "shardtrain/comm/string_collectives.hpp"

namespace shardtrain {

bool NodePlacement::uniform() const {
  return !ranks_of_node.empty() && std::all_of(ranks_of_node.begin(), ranks_of_node.end(), [&](const auto& r) {
    return r.size() == ranks_of_node.front().size();
  });
}

std::string NodePlacement::describe() const {
  const std::string nodes_text = std::to_string(nodes()) + (nodes() == 1 ? " node" : " nodes");
  if (nodes() <= 1) return nodes_text;
  if (uniform()) return nodes_text + " x " + std::to_string(ranks_per_node()) + (ranks_per_node() == 1 ? " rank" : " ranks");
  std::string sizes;
  for (const auto& r : ranks_of_node) sizes += (sizes.empty() ? "" : " + ") + std::to_string(r.size());
  return nodes_text + " (" + sizes + " ranks)";
}

NodePlacement placement_from_labels(const std::vector<std::string>& labels) {
  if (labels.empty()) throw UsageError("node placement: no ranks");
  NodePlacement p;
  std::map<std::string, int> index;
  for (int r = 0; r < int(labels.size()); ++r) {
    const std::string& label = labels[std::size_t(r)];
    if (label.empty()) throw UsageError("node placement: rank " + std::to_string(r) + " has no node name");
    auto [it, added] = index.emplace(label, p.nodes());
    if (added) {
      p.ranks_of_node.emplace_back();
      p.node_names.push_back(label);
    }
    p.node_of_rank.push_back(it->second);
    p.local_rank.push_back(int(p.ranks_of_node[std::size_t(it->second)].size()));
    p.ranks_of_node[std::size_t(it->second)].push_back(r);
  }
  return p;
}

std::string node_label(const char* override_text, int world_rank, int world_size, const std::string& host) {
  if (!override_text) return host;
  std::vector<std::string> labels;
  std::string text = override_text;
  for (std::size_t from = 0;;) {
    const std::size_t comma = text.find(',', from);
    labels.push_back(text.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (int(labels.size()) != world_size)
    throw UsageError("SHARDTRAIN_NODE_OF_RANK='" + text + "' names " + std::to_string(labels.size()) +
                     " rank(s) but the job has " + std::to_string(world_size) +
                     "; give one node label per world rank, comma-separated (e.g. a,a,b,b)");
  for (std::size_t r = 0; r < labels.size(); ++r)
    if (labels[r].empty())
      throw UsageError("SHARDTRAIN_NODE_OF_RANK='" + text + "' leaves rank " + std::to_string(r) + " without a node label");
  return labels[std::size_t(world_rank)];
}

std::string node_label_of_this_rank(int world_rank, int world_size) {
  return node_label(std::getenv("SHARDTRAIN_NODE_OF_RANK"), world_rank, world_size, host_name());
}

namespace {

// The handle of a hierarchical collective: complete when all its stages are; `finish` (the
// all-gather's return to rank order) runs once, on the first thread that sees them complete.
class ChainWork final : public Work {
 public:
  ChainWork(std::vector<CollectiveHandle> stages, std::shared_ptr<std::vector<unsigned char>> scratch,
            std::function<void()> finish)
      : stages_(std::move(stages)), scratch_(std::move(scratch)), finish_(std::move(finish)) {}

  bool test() override {
    for (auto& s : stages_)
      if (!s.test()) return false;
    complete();
    return true;
  }
  void wait(std::chrono::milliseconds timeout) override {
    for (auto& s : stages_) s.wait(timeout);
    complete();
  }
  void wait() override {
    for (auto& s : stages_) s.wait();
    complete();
  }
  std::uint64_t seq() const override { return stages_.back().seq(); }

  // Whether complete, without throwing (a failed stage counts as settled: its group failed).
  bool settled() {
    try {
      return test();
    } catch (const std::exception&) {
      return true;
    }
  }
  std::shared_ptr<std::vector<unsigned char>> take_scratch() { return std::move(scratch_); }

 private:
  void complete() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_) std::exchange(finish_, nullptr)();
  }

  std::vector<CollectiveHandle> stages_;
  std::shared_ptr<std::vector<unsigned char>> scratch_;
  std::function<void()> finish_;
  std::mutex mu_;
};

using Request = Communicator::Request;

class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(Communicator& group, NodePlacement placement, HierarchyOptions options)
      : group_(group), placement_(std::move(placement)), options_(options) {
    const int me = group.rank();
    my_node_ = placement_.node_of_rank[std::size_t(me)];
    my_local_ = placement_.local_rank[std::size_t(me)];
    L_ = placement_.ranks_per_node();
    if (!placement_.hierarchical() || options_.choice == HierarchyChoice::kFlat) return;
    // Every rank makes the same three splits in the same order (each is a collective over `group`).
    node_ = group.split(my_node_, me, group.name() + ".node");
    gather_ = group.split(my_node_, me, group.name() + ".node-gather");
    const int cross_color = L_ > 0 ? my_local_ : (my_local_ == 0 ? 0 : -1);
    cross_ = group.split(cross_color, my_node_, group.name() + ".cross");
  }

  ~HierarchicalCommunicator() override {
    // The sub-groups drain (or abandon) their work before the scratch it uses is freed.
    cross_.reset();
    gather_.reset();
    node_.reset();
  }

  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  int world_rank() const override { return group_.world_rank(); }
  int world_size() const override { return group_.world_size(); }
  const std::string& name() const override { return group_.name(); }
  std::chrono::milliseconds timeout() const override { return group_.timeout(); }
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name, std::optional<Phase> phase) override {
    return group_.split(color, key, name, phase);
  }

  CollectiveHandle submit(const Request& r) override {
    prune();
    if (!goes_hierarchical(r)) return group_.submit(r);
    switch (r.op) {
      case CollectiveOp::kAllReduce: return L_ > 0 ? uniform_all_reduce(r) : leader_all_reduce(r);
      case CollectiveOp::kReduceScatter: return reduce_scatter(r);
      case CollectiveOp::kAllGather: return all_gather(r);
      default: return group_.submit(r);
    }
  }

  void set_step(std::int64_t step) override {
    group_.set_step(step);
    for (Communicator* c : levels()) c->set_step(step);
  }
  std::int64_t step() const override { return group_.step(); }
  void set_fault_injection(const FaultInjection& faults) override {
    group_.set_fault_injection(faults);
    for (Communicator* c : levels()) c->set_fault_injection(faults);
  }
  std::uint64_t next_seq() const override { return group_.next_seq(); }
  CommStats stats() const override {
    CommStats s = group_.stats();
    if (!node_) return s;
    s.all_reduce_algorithm = "hierarchical";
    s.nodes = placement_.nodes();
    s.ranks_per_node = placement_.ranks_per_node();
    if (options_.choice == HierarchyChoice::kBySize)
      for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather})
        s.hierarchical_from_bytes.push_back({op, options_.min_bytes[static_cast<int>(op)]});
    for (Communicator* c : levels()) {
      CommLevel level{c->name(), c == cross_.get(), c->stats()};
      s.wait_s += level.stats.wait_s;
      s.scratch_bytes += level.stats.scratch_bytes;
      s.levels.push_back(std::move(level));
    }
    return s;
  }
  bool failed() const override {
    const auto subs = levels();
    return group_.failed() || std::any_of(subs.begin(), subs.end(), [](Communicator* c) { return c->failed(); });
  }
  std::shared_ptr<FlightRecorder> recorder() const override { return group_.recorder(); }

  const NodePlacement& placement() const { return placement_; }

 private:
  std::vector<Communicator*> levels() const {
    std::vector<Communicator*> out;
    for (Communicator* c : {node_.get(), gather_.get(), cross_.get()})
      if (c) out.push_back(c);
    return out;
  }

  // The same decision on every rank: it depends on the request's op, type and size only.
  bool goes_hierarchical(const Request& r) const {
    if (!node_) return false;
    const std::uint64_t elements = r.op == CollectiveOp::kAllReduce ? r.count : r.count * std::uint64_t(size());
    if (options_.choice == HierarchyChoice::kBySize &&
        elements * dtype_size(r.dtype) < options_.min_bytes[static_cast<int>(r.op)])
      return false;
    if (r.op == CollectiveOp::kAllReduce) return r.count >= std::size_t(std::max(L_, 1));
    if (r.op == CollectiveOp::kReduceScatter || r.op == CollectiveOp::kAllGather)
      return L_ > 0 && options_.host_buffers && !r.after.valid() && r.count > 0;
    return false;
  }

  // Host scratch of at least `bytes`, from the pool of completed operations' buffers.
  std::shared_ptr<std::vector<unsigned char>> scratch(std::size_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if ((*it)->size() >= bytes) {
        auto s = std::move(*it);
        free_.erase(it);
        return s;
      }
    return std::make_shared<std::vector<unsigned char>>(bytes);
  }
  // Completed operations give their scratch back (kept: the 8 largest).
  void prune() {
    while (!live_.empty() && live_.front()->settled()) {
      if (auto s = live_.front()->take_scratch()) free_.push_back(std::move(s));
      live_.pop_front();
    }
    if (free_.size() > 8) {
      std::sort(free_.begin(), free_.end(), [](const auto& a, const auto& b) { return a->size() > b->size(); });
      free_.resize(8);
    }
  }
  // The record every stage of the call `r` carries (CollectivePart, flight_recorder.hpp): its
  // number among this group's two-level collectives, the same on every rank (goes_hierarchical is).
  std::shared_ptr<const CollectivePart> next_part(const Request& r) {
    return std::make_shared<const CollectivePart>(CollectivePart{name(), ++collectives_, r.op, r.count});
  }

  CollectiveHandle chain(std::vector<CollectiveHandle> stages, std::shared_ptr<std::vector<unsigned char>> space,
                         std::function<void()> finish = nullptr) {
    auto work = std::make_shared<ChainWork>(std::move(stages), std::move(space), std::move(finish));
    live_.push_back(work);
    return CollectiveHandle(work);
  }

  int rank_at(int node, int local) const { return placement_.ranks_of_node[std::size_t(node)][std::size_t(local)]; }

  // The blocks of the two-level reduce-scatter and all-gather: piece l N + n of `grouped` (local
  // rank l's piece of the node stage, node n's block in it) is rank (n, l)'s block of `ranked`.
  // Copies ranked -> grouped when `to_grouped`, else back; `block` in bytes.
  void shuffle(unsigned char* grouped, unsigned char* ranked, std::size_t block, bool to_grouped) const {
    const int N = placement_.nodes();
    for (int l = 0; l < L_; ++l)
      for (int n = 0; n < N; ++n) {
        unsigned char* g = grouped + std::size_t(l * N + n) * block;
        unsigned char* k = ranked + std::size_t(rank_at(n, l)) * block;
        std::memcpy(to_grouped ? g : k, to_grouped ? k : g, block);
      }
  }

  // The number of pipelined chunks of an all-reduce of L b elements (the same on every rank: it
  // depends on the size and the options only).
  std::size_t pipeline_chunks(std::size_t b, std::size_t es) const {
    if (options_.pipeline_chunk_bytes == 0) return 1;
    const std::uint64_t bytes = std::uint64_t(b) * std::uint64_t(L_) * es;
    const std::uint64_t k = std::min<std::uint64_t>(bytes / options_.pipeline_chunk_bytes, kMaxPipelineChunks);
    return std::size_t(std::max<std::uint64_t>(1, std::min<std::uint64_t>(k, b)));
  }

  // Reduce-scatter inside the node, all-reduce of the shard across nodes, all-gather inside the
  // node, per chunk (the stages of consecutive chunks overlap); the tail of fewer than L elements
  // flat.
  CollectiveHandle uniform_all_reduce(const Request& r) {
    const std::size_t es = dtype_size(r.dtype), L = std::size_t(L_), b = r.count / L, tail = r.count - b * L;
    auto space = scratch(b * es);
    auto* shard = space->data();
    auto* data = static_cast<unsigned char*>(r.recv);
    const auto part = next_part(r);
    std::vector<CollectiveHandle> stages;
    if (tail > 0) {
      void* rest = data + b * L * es;
      stages.push_back(group_.submit({CollectiveOp::kAllReduce, r.dtype, rest, rest, tail, -1, r.after, part}));
    }
    const std::size_t K = pipeline_chunks(b, es);
    for (std::size_t k = 0; k < K; ++k) {
      const std::size_t lo = b * k / K, n = b * (k + 1) / K - lo;  // this chunk: n elements of each shard
      unsigned char* chunk = data + lo * L * es;                    // data[L lo, L (lo + n))
      unsigned char* piece = shard + lo * es;
      auto rs = node_->submit({CollectiveOp::kReduceScatter, r.dtype, chunk, piece, n, -1, r.after, part});
      auto ar = cross_->submit({CollectiveOp::kAllReduce, r.dtype, piece, piece, n, -1, rs, part});
      stages.push_back(gather_->submit({CollectiveOp::kAllGather, r.dtype, piece, chunk, n, -1, ar, part}));
    }
    return chain(std::move(stages), std::move(space));
  }

  // Uneven nodes: all-reduce inside the node, across nodes among the leaders, broadcast inside.
  CollectiveHandle leader_all_reduce(const Request& r) {
    const auto part = next_part(r);
    auto inside = node_->submit({CollectiveOp::kAllReduce, r.dtype, r.recv, r.recv, r.count, -1, r.after, part});
    CollectiveHandle ready = inside;
    if (cross_) ready = cross_->submit({CollectiveOp::kAllReduce, r.dtype, r.recv, r.recv, r.count, -1, inside, part});
    auto out = gather_->submit({CollectiveOp::kBroadcast, r.dtype, r.recv, r.recv, r.count, 0, ready, part});
    return chain({out}, nullptr);
  }

  // Scratch of the two-level reduce-scatter and all-gather: W blocks in node-major order (the node
  // stage's buffer) and N blocks (the cross-node stage's).
  struct TwoLevelSpace {
    std::shared_ptr<std::vector<unsigned char>> space;
    unsigned char *grouped = nullptr, *per_node = nullptr;
    std::size_t block = 0, nodes = 0;  // block in bytes
  };
  TwoLevelSpace two_level_space(const Request& r) {
    TwoLevelSpace s;
    s.nodes = std::size_t(placement_.nodes());
    s.block = r.count * dtype_size(r.dtype);
    s.space = scratch(s.block * (std::size_t(size()) + s.nodes));
    s.grouped = s.space->data();
    s.per_node = s.grouped + s.block * std::size_t(size());
    return s;
  }

  // in[W b]: local rank l's piece of the node reduce-scatter holds the blocks of ranks (n, l) for
  // n = 0..N-1, so the cross-node reduce-scatter (ordered by node) leaves block (n, l) on rank (n, l).
  CollectiveHandle reduce_scatter(const Request& r) {
    TwoLevelSpace s = two_level_space(r);
    shuffle(s.grouped, const_cast<unsigned char*>(static_cast<const unsigned char*>(r.send)), s.block, true);
    const auto part = next_part(r);
    auto inside = node_->submit({CollectiveOp::kReduceScatter, r.dtype, s.grouped, s.per_node, r.count * s.nodes, -1, {}, part});
    auto across = cross_->submit({CollectiveOp::kReduceScatter, r.dtype, s.per_node, r.recv, r.count, -1, inside, part});
    return chain({across}, std::move(s.space));
  }

  // All-gather across nodes (the blocks of ranks (n, l), n = 0..N-1), then inside the node; the
  // blocks go back to rank order when the operation completes.
  CollectiveHandle all_gather(const Request& r) {
    TwoLevelSpace s = two_level_space(r);
    const auto part = next_part(r);
    auto across = cross_->submit({CollectiveOp::kAllGather, r.dtype, r.send, s.per_node, r.count, -1, {}, part});
    auto inside = gather_->submit({CollectiveOp::kAllGather, r.dtype, s.per_node, s.grouped, r.count * s.nodes, -1, across, part});
    auto* out = static_cast<unsigned char*>(r.recv);
    auto finish = [this, block = s.block, grouped = s.grouped, out] { shuffle(grouped, out, block, false); };
    return chain({inside}, std::move(s.space), finish);
  }

  Communicator& group_;
  NodePlacement placement_;
  HierarchyOptions options_;
  int my_node_ = 0, my_local_ = 0, L_ = 0;
  std::uint64_t collectives_ = 0;  // two-level collectives submitted so far (CollectivePart::collective)
  // Operations not yet seen complete (their scratch must outlive their stages), and the buffers of
  // completed ones; declared before the sub-groups so that they are destroyed after them.
  std::deque<std::shared_ptr<ChainWork>> live_;
  std::vector<std::shared_ptr<std::vector<unsigned char>>> free_;
  std::unique_ptr<Communicator> node_, gather_, cross_;  // null when flat
};

}  // namespace

std::unique_ptr<Communicator> make_hierarchical_communicator(Communicator& group, const std::string& my_label,
                                                             HierarchyOptions options) {
  return make_hierarchical_communicator(group, my_label, [&options](const NodePlacement&) { return options; });
}

std::unique_ptr<Communicator> make_hierarchical_communicator(
    Communicator& group, const std::string& my_label,
    const std::function<HierarchyOptions(const NodePlacement&)>& choose) {
  NodePlacement placement = placement_from_labels(all_gather_strings(my_label, group));
  const HierarchyOptions options = choose(placement);
  return std::make_unique<HierarchicalCommunicator>(group, std::move(placement), options);
}

const NodePlacement* placement_of(const Communicator& comm) {
  const auto* h = dynamic_cast<const HierarchicalCommunicator*>(&comm);
  return h ? &h->placement() : nullptr;
}

}  // namespace shardtrain
