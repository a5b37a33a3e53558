// Topology-aware collectives (comm/hierarchical.hpp): the placement of ranks on nodes from labels
// (pure), the SHARDTRAIN_NODE_OF_RANK override, and, under mpirun, the hierarchical all-reduce,
// reduce-scatter and all-gather against serial sums computed here from every rank's inputs (each
// rank can make every other rank's inputs: they are a function of the rank) and against the flat
// communicator. At 4 ranks the layouts pretend 2 nodes x 2 ranks (contiguous and interleaved) and
// 3 + 1; at 1 and 2 ranks they are one node or one rank per node, where it must be flat.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "shardtrain/comm/hierarchical.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("hierarchical: nodes come from labels in order of first appearance", "[comm][hierarchical]") {
  const NodePlacement p = placement_from_labels({"h1", "h1", "h2", "h2"});
  CHECK(p.nodes() == 2);
  CHECK(p.uniform());
  CHECK(p.ranks_per_node() == 2);
  CHECK(p.hierarchical());
  CHECK(p.node_of_rank == std::vector<int>{0, 0, 1, 1});
  CHECK(p.local_rank == std::vector<int>{0, 1, 0, 1});
  CHECK(p.describe() == "2 nodes x 2 ranks");

  const NodePlacement interleaved = placement_from_labels({"b", "a", "b", "a", "b", "a"});
  CHECK(interleaved.node_names == std::vector<std::string>{"b", "a"});
  CHECK(interleaved.ranks_of_node == std::vector<std::vector<int>>{{0, 2, 4}, {1, 3, 5}});
  CHECK(interleaved.local_rank == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(interleaved.ranks_per_node() == 3);

  const NodePlacement uneven = placement_from_labels({"x", "x", "x", "y"});
  CHECK_FALSE(uneven.uniform());
  CHECK(uneven.ranks_per_node() == 0);
  CHECK(uneven.hierarchical());
  CHECK(uneven.ranks_of_node == std::vector<std::vector<int>>{{0, 1, 2}, {3}});
  CHECK(uneven.describe() == "2 nodes (3 + 1 ranks)");

  // Nothing to gain: one node, or one rank per node.
  CHECK_FALSE(placement_from_labels({"n", "n", "n"}).hierarchical());
  CHECK(placement_from_labels({"n", "n", "n"}).describe() == "1 node");
  CHECK_FALSE(placement_from_labels({"a", "b", "c"}).hierarchical());
  CHECK(placement_from_labels({"a", "b", "c"}).describe() == "3 nodes x 1 rank");

  CHECK_THROWS_AS(placement_from_labels({}), UsageError);
  CHECK_THROWS_AS(placement_from_labels({"a", ""}), UsageError);
}

TEST_CASE("hierarchical: SHARDTRAIN_NODE_OF_RANK names one label per world rank", "[comm][hierarchical]") {
  CHECK(node_label(nullptr, 1, 4, "host7") == "host7");
  CHECK(node_label("a,a,b,b", 0, 4, "h") == "a");
  CHECK(node_label("a,a,b,b", 3, 4, "h") == "b");
  CHECK(node_label("0,0,0,1", 3, 4, "h") == "1");
  CHECK_THROWS_WITH(node_label("a,a,b", 0, 4, "h"),
                    Catch::Contains("names 3 rank(s) but the job has 4"));
  CHECK_THROWS_AS(node_label("a,,b,b", 0, 4, "h"), UsageError);
  CHECK_THROWS_AS(node_label("", 0, 1, "h"), UsageError);
}

namespace {

// Rank r's input: floats of mixed sign and magnitude (so the order of additions shows in the last
// bits), a function of (rank, index, salt).
std::vector<float> float_input(int rank, std::size_t n, unsigned salt) {
  auto v = test::random_floats(n, 1000u * salt + unsigned(rank), -1.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) v[i] *= float(1 + (i + std::size_t(rank)) % 7);
  return v;
}
std::vector<std::uint64_t> word_input(int rank, std::size_t n, unsigned salt) {
  std::vector<std::uint64_t> v(n);
  for (std::size_t i = 0; i < n; ++i)  // large words: their sums wrap, as the exact sums' do
    v[i] = (std::uint64_t(rank + 1) * 0x9E3779B97F4A7C15ull) ^ (std::uint64_t(i) * 0xD1B54A32D192ED03ull + salt);
  return v;
}

// Serial sums over every rank's inputs, in double for floats (the reference), wrapping for words.
std::vector<double> float_sum(int W, std::size_t n, unsigned salt) {
  std::vector<double> s(n, 0.0);
  for (int r = 0; r < W; ++r) {
    const auto v = float_input(r, n, salt);
    for (std::size_t i = 0; i < n; ++i) s[i] += double(v[i]);
  }
  return s;
}
std::vector<std::uint64_t> word_sum(int W, std::size_t n, unsigned salt) {
  std::vector<std::uint64_t> s(n, 0);
  for (int r = 0; r < W; ++r) {
    const auto v = word_input(r, n, salt);
    for (std::size_t i = 0; i < n; ++i) s[i] += v[i];
  }
  return s;
}
// Sum over ranks of |x| per element: the scale of the rounding error of a float sum.
std::vector<double> abs_sum(int W, std::size_t n, unsigned salt) {
  std::vector<double> s(n, 0.0);
  for (int r = 0; r < W; ++r) {
    const auto v = float_input(r, n, salt);
    for (std::size_t i = 0; i < n; ++i) s[i] += std::fabs(double(v[i]));
  }
  return s;
}

// Fast-mode tolerance: an fp32 sum of W terms in any order is within (W - 1) u sum|x| of the exact
// sum (u = 2^-24); we allow W u sum|x| for the final rounding too.
bool within_fp32_sum_bound(const std::vector<float>& got, const std::vector<double>& exact, const std::vector<double>& scale,
                           int W, std::size_t first = 0) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::fabs(double(got[i]) - exact[first + i]) > double(W) * std::ldexp(1.0, -24) * scale[first + i]) return false;
  return true;
}

// The labels each layout gives the world's ranks (4 ranks: 2 x 2, 2 x 2 interleaved, 3 + 1).
std::vector<std::vector<std::string>> layouts(int W) {
  if (W == 4) return {{"a", "a", "b", "b"}, {"a", "b", "a", "b"}, {"a", "a", "a", "b"}};
  if (W == 2) return {{"a", "b"}, {"a", "a"}};
  return {{"a"}};
}

std::string joined(const std::vector<std::string>& labels) {
  std::string s;
  for (const auto& l : labels) s += (s.empty() ? "" : ",") + l;
  return s;
}

// All-reduces of a float and a word buffer of each size through `h`, all in flight at once (they
// pipeline through the sub-groups), inputs salted by salt0 + k; checks each against the serial
// sums (floats within the fp32 bound, words exactly) and that every rank holds rank 0's bits.
void check_all_reduces(Communicator& h, Communicator& world, const std::vector<std::size_t>& sizes, unsigned salt0) {
  const int W = world.size(), me = world.rank();
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<std::uint64_t>> words;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    floats.push_back(float_input(me, sizes[k], salt0 + unsigned(k)));
    words.push_back(word_input(me, sizes[k], salt0 + unsigned(k)));
  }
  std::vector<CollectiveHandle> handles;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    handles.push_back(h.all_reduce_async(floats[k].data(), sizes[k]));
    handles.push_back(h.all_reduce_async(words[k].data(), sizes[k]));
  }
  for (auto& handle : handles) handle.wait();
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    INFO("all-reduce of " << sizes[k] << " elements");
    const unsigned salt = salt0 + unsigned(k);
    CHECK(within_fp32_sum_bound(floats[k], float_sum(W, sizes[k], salt), abs_sum(W, sizes[k], salt), W));
    CHECK(test::bitwise_equal(words[k], word_sum(W, sizes[k], salt)));  // integer sums: exact
    std::vector<float> rank0 = floats[k];
    world.broadcast(rank0.data(), rank0.size(), 0);
    CHECK(test::bitwise_equal(floats[k], rank0));
  }
}

}  // namespace

TEST_CASE("hierarchical: all-reduce, reduce-scatter and all-gather equal the serial sums on every layout",
          "[mpi][comm][hierarchical]") {
  auto world = test::test_communicator(MPI_COMM_WORLD, "flat");
  const int W = world->size(), me = world->rank();
  for (const auto& labels : layouts(W)) {
    INFO("layout " << joined(labels));
    auto h = make_hierarchical_communicator(*world, labels[std::size_t(me)]);
    const NodePlacement* p = placement_of(*h);
    REQUIRE(p != nullptr);
    CHECK(p->nodes() == placement_from_labels(labels).nodes());
    CHECK(h->size() == W);
    CHECK(h->rank() == me);

    // All-reduce: several buckets in flight at once, sizes with and without a tail (n mod L != 0),
    // one smaller than a node.
    const std::vector<std::size_t> sizes = {1, 3, 1000, 1003, 65536 + 5};
    check_all_reduces(*h, *world, sizes, 0);

    // Reduce-scatter of W blocks: rank r gets the sum of block r; exact for words.
    const std::size_t block = 777;
    const auto rs_in = float_input(me, block * std::size_t(W), 50);
    const auto rs_words = word_input(me, block * std::size_t(W), 51);
    std::vector<float> rs_out(block);
    std::vector<std::uint64_t> rs_words_out(block);
    auto a = h->reduce_scatter_async(rs_in.data(), rs_out.data(), block);
    auto b = h->reduce_scatter_async(rs_words.data(), rs_words_out.data(), block);
    a.wait();
    b.wait();
    const auto exact = float_sum(W, block * std::size_t(W), 50);
    const auto scale = abs_sum(W, block * std::size_t(W), 50);
    CHECK(within_fp32_sum_bound(rs_out, exact, scale, W, std::size_t(me) * block));
    const auto words_exact = word_sum(W, block * std::size_t(W), 51);
    CHECK(test::bitwise_equal(rs_words_out, std::vector<std::uint64_t>(words_exact.begin() + std::ptrdiff_t(std::size_t(me) * block),
                                                                       words_exact.begin() + std::ptrdiff_t(std::size_t(me + 1) * block))));

    // All-gather: the blocks in rank order, bitwise (copies only); the flat one agrees.
    const auto ag_in = float_input(me, block, 60);
    std::vector<float> ag_out(block * std::size_t(W)), ag_flat(block * std::size_t(W));
    h->all_gather(ag_in.data(), ag_out.data(), block);
    world->all_gather(ag_in.data(), ag_flat.data(), block);
    std::vector<float> expected;
    for (int r = 0; r < W; ++r) {
      const auto v = float_input(r, block, 60);
      expected.insert(expected.end(), v.begin(), v.end());
    }
    CHECK(test::bitwise_equal(ag_out, expected));
    CHECK(test::bitwise_equal(ag_flat, expected));

    // Accounting: hierarchical layouts report their sub-groups, the cross-node one as inter-node.
    const CommStats stats = h->stats();
    if (p->hierarchical()) {
      CHECK(stats.all_reduce_algorithm == "hierarchical");
      const bool in_cross = p->uniform() || p->local_rank[std::size_t(me)] == 0;  // uneven: the leaders only
      REQUIRE(stats.levels.size() == (in_cross ? 3u : 2u));
      CHECK(stats.levels[0].name == "flat.node");
      CHECK_FALSE(stats.levels[0].inter_node);
      if (stats.levels.size() == 3) CHECK(stats.levels[2].inter_node);
      CHECK(stats.to_json().contains("inter_node_busy_s"));
      // Uniform nodes: each all-reduce of >= L elements is one reduce-scatter inside the node.
      if (p->uniform()) {
        const std::size_t L = std::size_t(p->ranks_per_node());
        std::uint64_t expected_rs = 2;  // the float and word reduce-scatters
        for (std::size_t n : sizes) expected_rs += n >= L ? 2 : 0;  // a float and a word all-reduce each
        CHECK(stats.levels[0].stats.per_op[int(CollectiveOp::kReduceScatter)].calls == expected_rs);
      }
    } else {
      CHECK(stats.levels.empty());
      CHECK(stats.all_reduce_algorithm != "hierarchical");
    }
  }
}

TEST_CASE("hierarchical: a pipelined all-reduce (chunks through the levels) equals the serial sums",
          "[mpi][comm][hierarchical]") {
  auto world = test::test_communicator(MPI_COMM_WORLD, "flat");
  const int W = world->size(), me = world->rank();
  for (const auto& labels : layouts(W)) {
    INFO("layout " << joined(labels));
    HierarchyOptions options;
    options.pipeline_chunk_bytes = 1024;  // small: several chunks of every size below but the first
    auto h = make_hierarchical_communicator(*world, labels[std::size_t(me)], options);
    const NodePlacement* p = placement_of(*h);
    REQUIRE(p != nullptr);
    // 1 element (no chunk: under a node), 1003 (4012 bytes: 3 chunks of uneven length, a tail when
    // L does not divide it), 65541 (the 8-chunk cap), all in flight at once.
    const std::vector<std::size_t> sizes = {1, 1003, 65536 + 5};
    check_all_reduces(*h, *world, sizes, 70);
    // Uniform nodes: one reduce-scatter inside the node per chunk, the chunk count the header's
    // rule: K = min(floor(bytes of L b elements / 1024), 8, b), at least 1, for each of the
    // float and the word all-reduce (4 and 8 bytes an element).
    const CommStats stats = h->stats();
    if (p->hierarchical() && p->uniform()) {
      const std::size_t L = std::size_t(p->ranks_per_node());
      std::uint64_t expected_rs = 0;
      for (std::size_t n : sizes) {
        const std::size_t b = n / L;
        if (b == 0) continue;
        for (std::size_t es : {std::size_t(4), std::size_t(8)})
          expected_rs += std::max<std::size_t>(1, std::min<std::size_t>({b * L * es / 1024, std::size_t(kMaxPipelineChunks), b}));
      }
      CHECK(stats.levels[0].stats.per_op[int(CollectiveOp::kReduceScatter)].calls == expected_rs);
      CHECK(expected_rs > 2 * sizes.size());  // the chunks are really there
    }
  }
}
