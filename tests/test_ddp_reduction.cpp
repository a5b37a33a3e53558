// DDP's deterministic reduction in pieces (ddp.hpp): the lanes of each unit are reduce-scattered
// piece by piece, each rank decodes its block and the blocks are all-gathered into the gradient.
// Checked against the exact sum's own all-reduce of the same micro-batches, all added on rank 0
// (exact_all_reduce, whose rule test_exact_sum.cpp holds to an independent reference; not over
// MPI_COMM_SELF: after the skipped-collective case of test_comm.cpp, Open MPI 4.1 crashes in the
// skipper's next one-rank MPI_Comm_dup, which reuses the abandoned communicator's id while the
// other ranks' messages for it are pending): bitwise, at 1, 2 and 4 ranks, with pieces small enough that a unit has many, a last
// piece reaches past its unit, and the in-flight limit is met; and the piece plan itself.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/comm/mpi.hpp"
#include "shardtrain/model/config.hpp"
#include "shardtrain/model/parameters.hpp"
#include "shardtrain/parallel/ddp.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("ddp: deterministic reduction pieces cover each unit in whole chunks, padding only the last", "[ddp]") {
  const std::size_t chunk = ExactSum::kChunk;
  CHECK(plan_lane_pieces(0, 2, 1024).empty());
  for (int W : {1, 2, 3, 4, 8})
    for (std::size_t n : {std::size_t(1), std::size_t(255), std::size_t(256), std::size_t(1000), std::size_t(7087872),
                          std::size_t(39383808)})
      for (std::size_t block : {std::size_t(1), std::size_t(256), std::size_t(1000), std::size_t(1) << 20}) {
        const auto pieces = plan_lane_pieces(n, W, block);
        INFO("n " << n << " W " << W << " block " << block);
        REQUIRE(!pieces.empty());
        const std::size_t full = (block + chunk - 1) / chunk * chunk;
        std::size_t next = 0, bad = 0;  // pieces that do not follow on, or are not whole chunks of at most `full`
        for (std::size_t j = 0; j < pieces.size(); ++j) {
          const LanePiece& p = pieces[j];
          bad += p.first != next || p.block % chunk != 0 || p.block == 0 || p.block > full ||
                 (j + 1 < pieces.size() && p.block != full);
          next += std::size_t(W) * p.block;
        }
        CHECK(bad == 0);
        const std::size_t end = lane_pieces_end(pieces, W);
        CHECK(end == next);
        CHECK(end >= n);
        CHECK(end - n < std::size_t(W) * chunk);  // the padding: less than one chunk per rank
      }
}

namespace {

// Micro-batch `m`'s gradient: per 256-element chunk a scale between 2^-40 and 2^10, elements
// spread over 2^-30 of it, every sign, some exact zeros and an all-zero chunk.
std::vector<float> micro_batch_gradient(std::size_t n, int m) {
  std::mt19937 rng(1000u + unsigned(m));
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-40, 10), spread(-30, 0);
  std::vector<float> g(n);
  for (std::size_t c = 0; c < n; c += ExactSum::kChunk) {
    const int s = scale(rng);
    const bool zero_chunk = (c / ExactSum::kChunk) % 7 == 3;
    for (std::size_t i = c; i < std::min(n, c + ExactSum::kChunk); ++i)
      g[i] = zero_chunk || i % 13 == 0 ? 0.0f : std::ldexp(mant(rng), s + spread(rng));
  }
  return g;
}

}  // namespace

TEST_CASE("ddp: deterministic reduction in pieces equals the exact sum's all-reduce bitwise", "[mpi][ddp]") {
  test::ensure_mpi();
  CommOptions o;
  o.name = "ddp-pieces";
  o.timeout = std::chrono::milliseconds(60000);
  auto world = make_mpi_communicator(MPI_COMM_WORLD, o);
  const int W = world->size(), r = world->rank(), A = 2;

  ModelConfig config;  // units of 128 (the final norm) to 49,984 elements (a block)
  config.vocab = 90;
  config.seq_len = 16;
  config.d_model = 64;
  config.n_layer = 2;
  config.n_head = 2;
  const ParameterRegistry registry(config);
  const std::size_t n = registry.total();
  auto backend = make_cpu_backend(1);
  std::vector<float> grads(n);
  // 256 elements per block: every unit has many pieces; the in-flight limit (4) is reached.
  GradientReducer reducer(*backend, *world, registry, grads.data(), ReductionMode::kDeterministic, 0, A, 256);
  for (int step = 0; step < 2; ++step) {  // a second step reuses the sums (cleared, not zeroed)
    reducer.start_step();
    for (int m = 0; m < A; ++m) {
      reducer.before_backward(m);
      const std::vector<float> g = micro_batch_gradient(n, 10 * step + r * A + m);
      std::copy(g.begin(), g.end(), grads.begin());
      for (auto u = registry.units().rbegin(); u != registry.units().rend(); ++u) reducer.gradient_ready(u->begin);
      reducer.after_backward(m);
    }
    reducer.finish(std::vector<double>(std::size_t(A), 1.0));

    std::vector<std::size_t> segments;
    for (const auto& u : registry.units()) segments.push_back(u.size());
    ExactSum reference(segments);  // rank 0 adds every micro-batch, the others none: the same multiset
    if (r == 0)
      for (int m = 0; m < W * A; ++m) reference.add(micro_batch_gradient(n, 10 * step + m).data());
    std::vector<float> want(n);
    exact_all_reduce(*world, reference, std::int64_t(W) * A, "the reference", want.data());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += std::memcmp(&grads[i], &want[i], sizeof(float)) != 0;
    INFO("rank " << r << " of " << W << ", step " << step << ": " << n << " elements");
    CHECK(differ == 0);
  }
}
