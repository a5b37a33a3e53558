// Sampler: the Feistel permutation is a bijection (exhaustive small n, inverse spot checks at 1e9),
// differs by seed and epoch; elastic steps: every W in {1,2,4,8} reads the same global batch, and
// stopping at (epoch, consumed) and resuming on another W continues the uninterrupted sequence,
// across epoch boundaries; the prefetching BatchLoader delivers exactly those samples' tokens.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <set>

#include "shardtrain/data/batch_loader.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/data/sampler.hpp"
#include "shardtrain/data/selection.hpp"
#include "test_support.hpp"

using namespace shardtrain;
using namespace shardtrain::data;

TEST_CASE("the epoch permutation is a bijection for every small n", "[sampler]") {
  std::vector<uint64_t> sizes;
  for (uint64_t n = 1; n <= 300; ++n) sizes.push_back(n);
  for (uint64_t n : {1000u, 1023u, 1024u, 1025u, 4096u, 65535u, 65537u}) sizes.push_back(n);
  for (uint64_t n : sizes) {
    for (uint64_t seed : {0u, 1u, 12345u}) {
      EpochSampler s(n, seed);
      for (uint64_t epoch : {0u, 1u, 7u}) {
        std::vector<char> seen(n, 0);
        for (uint64_t p = 0; p < n; ++p) {
          uint64_t x = s.sample_at(epoch, p);
          REQUIRE(x < n);
          REQUIRE_FALSE(seen[x]);
          seen[x] = 1;
          REQUIRE(s.position_of(epoch, x) == p);
        }
      }
    }
  }
  CHECK_THROWS_AS(EpochSampler(0, 1), UsageError);
  CHECK_THROWS_AS(EpochSampler(10, 1).sample_at(0, 10), UsageError);
}

TEST_CASE("the permutation at n = 10^9 inverts and does not collide on spot checks", "[sampler]") {
  const uint64_t n = 1000000000ULL;
  EpochSampler s(n, 42);
  std::set<uint64_t> images;
  for (uint64_t k = 0; k < 20000; ++k) {
    uint64_t p = (k * 0x9e3779b97f4a7c15ULL) % n;
    if (k < 10) p = k;
    if (k >= 10 && k < 20) p = n - 1 - (k - 10);
    for (uint64_t epoch : {0u, 3u}) {
      uint64_t x = s.sample_at(epoch, p);
      REQUIRE(x < n);
      REQUIRE(s.position_of(epoch, x) == p);
      REQUIRE(s.sample_at(epoch, s.position_of(epoch, p)) == p);
      if (epoch == 0) images.insert(x);
    }
  }
  CHECK(images.size() == 20000);  // distinct positions map to distinct samples
  // Not the identity and spread out: the images of 0..999 cover the range roughly uniformly.
  uint64_t low = 0;
  for (uint64_t p = 0; p < 1000; ++p) low += s.sample_at(0, p) < n / 2;
  CHECK(low > 400);
  CHECK(low < 600);
}

TEST_CASE("the permutation differs by seed and by epoch", "[sampler]") {
  const uint64_t n = 1000;
  EpochSampler a(n, 1), b(n, 2);
  auto agree = [&](const EpochSampler& x, uint64_t ex, const EpochSampler& y, uint64_t ey) {
    int same = 0;
    for (uint64_t p = 0; p < n; ++p) same += x.sample_at(ex, p) == y.sample_at(ey, p);
    return same;
  };
  CHECK(agree(a, 0, a, 0) == int(n));
  CHECK(agree(a, 0, b, 0) < 20);  // a random pair of permutations agrees in ~1 place
  CHECK(agree(a, 0, a, 1) < 20);
  CHECK(agree(a, 1, a, 2) < 20);
  CHECK(agree(b, 5, b, 6) < 20);
  int identity = 0;
  for (uint64_t p = 0; p < n; ++p) identity += a.sample_at(0, p) == p;
  CHECK(identity < 20);
}

namespace {
// The uninterrupted reference: stream positions in order.
std::vector<uint64_t> stream(const EpochSampler& s, SamplerState start, uint64_t count) {
  std::vector<uint64_t> out;
  for (uint64_t k = 0; k < count; ++k) out.push_back(s.sample_at_stream(start, k));
  return out;
}
// All ranks' samples of one step, concatenated in rank order.
std::vector<uint64_t> union_of_ranks(const EpochSampler& s, SamplerState state, int b, uint64_t B, int W) {
  const int A = grad_accum_for(B, b, W);
  std::vector<uint64_t> all;
  for (int r = 0; r < W; ++r) {
    auto part = rank_step_samples(s, state, {b, A, r, W});
    REQUIRE(part.size() == uint64_t(A) * b);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}
}  // namespace

TEST_CASE("elastic steps: every world size reads the same global batch and resumes anywhere", "[sampler]") {
  const uint64_t n = 37;  // not a multiple of any batch: steps straddle epoch boundaries
  EpochSampler s(n, 9);
  for (int b : {1, 2}) {
    const uint64_t B = 8 * uint64_t(b);  // global batch: 8 micro-batches of b
    const auto reference = stream(s, {}, 30 * B);
    for (int W : {1, 2, 4, 8}) {
      SamplerState state{};
      for (int step = 0; step < 30; ++step) {
        auto got = union_of_ranks(s, state, b, B, W);
        REQUIRE(got == global_step_samples(s, state, B));
        REQUIRE(std::vector<uint64_t>(reference.begin() + step * B, reference.begin() + (step + 1) * B) == got);
        state = s.advance(state, B);
      }
      CHECK(state.epoch == 30 * B / n);
      CHECK(state.consumed == 30 * B % n);
    }
    // Stop after k steps on W1, continue on W2: the sequence is the uninterrupted one.
    for (int W1 : {1, 2, 4, 8})
      for (int W2 : {1, 2, 4, 8}) {
        std::vector<uint64_t> got;
        SamplerState state{};
        for (int step = 0; step < 30; ++step) {
          auto part = union_of_ranks(s, state, b, B, step < 11 ? W1 : W2);
          got.insert(got.end(), part.begin(), part.end());
          state = s.advance(state, B);
          if (step == 10) state = SamplerState{state.epoch, state.consumed};  // "checkpoint"
        }
        REQUIRE(got == reference);
      }
  }
  CHECK_THROWS_WITH(grad_accum_for(12, 2, 4), Catch::Contains("12") && Catch::Contains("2") && Catch::Contains("4"));
  CHECK(grad_accum_for(32, 2, 4) == 4);
}

TEST_CASE("an epoch uses every sample exactly once", "[sampler]") {
  const uint64_t n = 1000;
  EpochSampler s(n, 3);
  for (uint64_t epoch : {0u, 1u}) {
    std::vector<char> seen(n, 0);
    SamplerState st{epoch, 0};
    for (uint64_t k = 0; k < n; ++k) {
      uint64_t x = s.sample_at_stream(st, k);
      REQUIRE_FALSE(seen[x]);
      seen[x] = 1;
    }
  }
  CHECK(s.advance({2, 999}, 1) == SamplerState{3, 0});
  CHECK(s.advance({2, 10}, 2500) == SamplerState{4, 510});
  CHECK_THROWS_AS(s.advance({0, 1000}, 1), UsageError);
}

namespace {
// A small byte dataset: 9 documents of varied length (train stream ~ 1.5k tokens).
std::string make_dataset(const std::string& dir) {
  const std::string path = dir + "/loader.h5";
  DatasetWriter w(path, 256, "bytes", 0);
  for (int i = 0; i < 9; ++i) {
    std::vector<uint8_t> t(50 + 37 * i);
    for (std::size_t k = 0; k < t.size(); ++k) t[k] = uint8_t(1 + (i * 31 + k * 7) % 255);
    w.add_document("d" + std::to_string(i), 1, 1000 + i, 1000 + i, "o" + std::to_string(i % 2),
                   std::span<const uint8_t>(t));
  }
  w.finish();
  return path;
}
std::vector<int32_t> expected_tokens(const TrainingData& d, const std::vector<uint64_t>& ids) {
  const std::size_t row = std::size_t(d.seq_len()) + 1;
  std::vector<int32_t> out(ids.size() * row);
  for (std::size_t k = 0; k < ids.size(); ++k) d.read_train_sample(ids[k], out.data() + k * row);
  return out;
}
}  // namespace

TEST_CASE("the batch loader's ranks together read the global batch, also after resuming elsewhere", "[sampler]") {
  const std::string dir = test::temp_dir("loader");
  const auto data = TrainingData::open(make_dataset(dir), {std::nullopt, std::nullopt, 16});
  const uint64_t n = data.num_train_samples();
  REQUIRE(n > 20);
  const int b = 2, seq = 16;
  const uint64_t B = 16;
  const int steps = 2 * int(n / B) + 3;  // crosses at least two epoch boundaries
  const uint64_t seed = 77;
  EpochSampler s(n, seed);
  std::vector<int32_t> reference;
  {
    BatchLoader one(data, seed, {}, seq, b, int(B / b), 0, 1);
    SamplerState state{};
    for (int step = 0; step < steps; ++step) {
      auto batch = one.next();
      REQUIRE(batch.state_before == state);
      REQUIRE(batch.sample_ids == global_step_samples(s, state, B));
      REQUIRE(batch.tokens == expected_tokens(data, batch.sample_ids));
      REQUIRE(batch.wait_s >= 0.0);
      state = batch.state_after;
      reference.insert(reference.end(), batch.tokens.begin(), batch.tokens.end());
    }
  }
  for (int W1 : {1, 2, 4, 8})
    for (int W2 : {8, 4, 2, 1}) {
      std::vector<int32_t> got;
      SamplerState state{};
      const int stop = steps / 2;
      for (int phase = 0; phase < 2; ++phase) {
        const int W = phase == 0 ? W1 : W2;
        const int A = grad_accum_for(B, b, W);
        std::vector<std::unique_ptr<BatchLoader>> ranks;
        for (int r = 0; r < W; ++r)
          ranks.push_back(std::make_unique<BatchLoader>(data, seed, state, seq, b, A, r, W));
        for (int step = phase == 0 ? 0 : stop; step < (phase == 0 ? stop : steps); ++step) {
          SamplerState after{};
          for (int r = 0; r < W; ++r) {
            auto batch = ranks[r]->next();
            REQUIRE(batch.tokens.size() == std::size_t(A) * b * (seq + 1));
            got.insert(got.end(), batch.tokens.begin(), batch.tokens.end());
            after = batch.state_after;
          }
          state = after;
        }
      }
      INFO("W1 " << W1 << " W2 " << W2);
      REQUIRE(got == reference);
    }
  CHECK_THROWS_AS(BatchLoader(data, seed, {}, seq + 1, b, 1, 0, 1), UsageError);
  CHECK_THROWS_AS(BatchLoader(data, seed, {}, seq, b, 1, 2, 2), UsageError);
  CHECK_THROWS_AS(BatchLoader(data, seed, {0, n}, seq, b, 1, 0, 1), UsageError);
}

TEST_CASE("under mpirun each rank loads its micro-batches and together they form the global batch", "[mpi][sampler]") {
  test::ensure_mpi();
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // Rank 0 writes the dataset; every rank opens it.
  char path[4096] = {0};
  if (rank == 0) {
    std::string p = make_dataset(test::temp_dir("loader-mpi"));
    std::snprintf(path, sizeof path, "%s", p.c_str());
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  const auto data = TrainingData::open(path, {std::nullopt, std::nullopt, 8});
  const int b = 1, seq = 8;
  const uint64_t B = 8, seed = 5;
  const int A = grad_accum_for(B, b, world);
  const int steps = int(2 * data.num_train_samples() / B) + 2;
  // Resume half-way from the state rank 0 reports, as a checkpoint would.
  std::vector<int32_t> mine;
  SamplerState state{};
  for (int phase = 0; phase < 2; ++phase) {
    BatchLoader loader(data, seed, state, seq, b, A, rank, world);
    for (int step = phase == 0 ? 0 : steps / 2; step < (phase == 0 ? steps / 2 : steps); ++step) {
      auto batch = loader.next();
      mine.insert(mine.end(), batch.tokens.begin(), batch.tokens.end());
      state = batch.state_after;
    }
    uint64_t st[2] = {state.epoch, state.consumed};
    MPI_Bcast(st, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    state = {st[0], st[1]};
  }
  // Gather per step: rank r's A micro-batches of every step, then interleave into step order.
  std::vector<int32_t> all(mine.size() * world);
  MPI_Gather(mine.data(), int(mine.size()), MPI_INT32_T, all.data(), int(mine.size()), MPI_INT32_T, 0, MPI_COMM_WORLD);
  int ok = 1;
  if (rank == 0) {
    const std::size_t per_rank_step = std::size_t(A) * b * (seq + 1);
    std::vector<int32_t> got;
    for (int step = 0; step < steps; ++step)
      for (int r = 0; r < world; ++r) {
        auto first = all.begin() + std::ptrdiff_t(r * mine.size() + step * per_rank_step);
        got.insert(got.end(), first, first + std::ptrdiff_t(per_rank_step));
      }
    BatchLoader single(data, seed, {}, seq, b, int(B), 0, 1);
    std::vector<int32_t> reference;
    for (int step = 0; step < steps; ++step) {
      auto batch = single.next();
      reference.insert(reference.end(), batch.tokens.begin(), batch.tokens.end());
    }
    ok = got == reference;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  CHECK(ok == 1);
  MPI_Barrier(MPI_COMM_WORLD);
}
