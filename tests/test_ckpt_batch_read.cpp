// CheckpointReader::read_batch (a restore's reads in one pass per rank file) and the resume that
// validates a checkpoint while the ranks read it (restore_resume_checkpoint_collective).
#include <algorithm>
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "shardtrain/ckpt/commit.hpp"
#include "test_ckpt_support.hpp"

namespace ck = shardtrain::ckpt;
namespace fs = std::filesystem;
using namespace shardtrain::test;
using namespace shardtrain::test::ckpt_fixture;

namespace {

// Bytes of elements [offset, offset + count) of `name` in `state`.
std::vector<unsigned char> expected_bytes(const ToyState& state, const ck::TensorSpec& spec, std::int64_t offset,
                                          std::int64_t count) {
  const auto& all = state.of(spec.name);
  const std::size_t esize = ck::dtype_size(spec.dtype);
  return {all.begin() + std::ptrdiff_t(std::size_t(offset) * esize),
          all.begin() + std::ptrdiff_t(std::size_t(offset + count) * esize)};
}

// Flips one data byte of the first piece the rank file `file` holds in checkpoint `folder`.
std::string flip_first_piece_in(const std::string& folder, const std::string& file) {
  ck::ReadOptions unverified;
  unverified.verify_files = false;
  const ck::CheckpointReader reader(folder, unverified);
  for (const auto& t : reader.tensors())
    for (const auto& p : t.pieces)
      if (p.file == file) {
        flip_byte(folder + "/" + p.file, piece_file_offset(folder + "/" + p.file, p.dataset));
        return t.spec.name;
      }
  return "";
}

}  // namespace

TEST_CASE("ckpt: read_batch gives each request the saved bytes in one pass, and checks whole tensors",
          "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-batch-read");
  const auto state = make_state(5, 3);
  save_state(dir, state, 1, *comm);
  comm->barrier();
  const std::string folder = dir + "/step_00000001";
  ck::ReadOptions options;
  options.share = {rank, world};
  const ck::CheckpointReader reader(folder, options);
  for (const auto& t : reader.tensors())
    for (const auto& p : t.pieces) CHECK(p.address > 0);  // the writer's pieces take the plain read

  // Every tensor whole, then parts that cross pieces and overlap each other, and an empty one.
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<std::pair<ck::TensorSpec, std::pair<std::int64_t, std::int64_t>>> asked;
  for (const auto& spec : state.specs) asked.push_back({spec, {0, spec.numel()}});
  const ck::TensorSpec& wte = state.specs.front();
  asked.push_back({wte, {1, wte.numel() / 2}});
  asked.push_back({wte, {wte.numel() / 3, wte.numel() - wte.numel() / 3 - 1}});
  asked.push_back({wte, {7, 0}});
  std::vector<ck::ReadRequest> requests;
  for (const auto& [spec, range] : asked) {
    buffers.emplace_back(std::size_t(range.second) * ck::dtype_size(spec.dtype) + 1, 0xee);
    requests.push_back({spec.name, range.first, range.second, buffers.back().data()});
  }
  reader.read_batch(requests);
  for (std::size_t i = 0; i < asked.size(); ++i) {
    INFO(asked[i].first.name << " [" << asked[i].second.first << ", +" << asked[i].second.second << ")");
    const auto want = expected_bytes(state, asked[i].first, asked[i].second.first, asked[i].second.second);
    // std::equal, not memcmp: the empty request's expected bytes have no data pointer at all.
    CHECK(std::equal(want.begin(), want.end(), buffers[i].begin()));
    CHECK(buffers[i].back() == 0xee);  // not a byte past the request
  }
  CHECK_THROWS_WITH(reader.read_batch({{wte.name, wte.numel() - 2, 3, buffers.front().data()}}),
                    Catch::Contains("is outside tensor 'wte'"));
  comm->barrier();

  // A flipped byte: a whole-tensor request fails the tensor's checksum, naming it; a partial
  // request does not check (as read_range).
  if (rank == 0) flip_byte(folder + "/" + reader.at("wte").pieces.front().file, reader.at("wte").pieces.front().address);
  comm->barrier();
  ck::ReadOptions unverified;
  unverified.verify_files = false;
  const ck::CheckpointReader damaged(folder, unverified);
  std::vector<unsigned char> whole(std::size_t(wte.numel()) * 4);
  CHECK_THROWS_WITH(damaged.read_batch({{"wte", 0, wte.numel(), whole.data()}}),
                    Catch::Contains("tensor 'wte' fails its checksum"));
  CHECK_NOTHROW(damaged.read_batch({{"wte", 0, 4, whole.data()}}));
  comm->barrier();
}

TEST_CASE("ckpt: a resume validates while the ranks read, and falls back past a file refused after it was read",
          "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-restore-together");
  const ToyState steps[] = {make_state(1), make_state(2), make_state(3)};
  for (std::int64_t s = 1; s <= 3; ++s) save_state(dir, steps[s - 1], s, *comm);
  comm->barrier();
  // Step 3: a flipped byte in the last rank file, which only the last rank hashes, in a tensor the
  // restore below never asks for: only the hashing of every byte of the file can refuse it.
  std::string last_file;
  {
    ck::ReadOptions unverified;
    unverified.verify_files = false;
    last_file = ck::CheckpointReader(dir + "/step_00000003", unverified).manifest().files.back().name;
  }
  if (rank == 0) REQUIRE(flip_first_piece_in(dir + "/step_00000003", last_file) != "ln_f.weight");
  comm->barrier();

  const ck::TensorSpec ln_f = {"ln_f.weight", {16}};
  std::vector<float> restored(16, -1.0f);
  int restores = 0;
  const auto restore = [&](const ck::CheckpointReader& reader) {
    ++restores;
    reader.read_batch({{ln_f.name, 0, ln_f.numel(), restored.data()}});
  };
  const ck::CollectiveRestore found = ck::restore_resume_checkpoint_collective(dir, *comm, {}, restore);
  REQUIRE(found.folder);
  CHECK(*found.folder == dir + "/step_00000002");
  CHECK(restores == 2);  // step 3 was read on every rank, then refused by the last rank's hash
  CHECK(found.restored_then_refused);
  CHECK(restored == steps[1].floats("ln_f.weight"));

  // Nothing valid left: the caller learns that the refused checkpoint's reads reached its state.
  if (rank == 0) {
    fs::remove_all(dir + "/step_00000001");
    fs::remove_all(dir + "/step_00000002");
  }
  comm->barrier();
  restores = 0;
  const ck::CollectiveRestore none = ck::restore_resume_checkpoint_collective(dir, *comm, {}, restore);
  CHECK_FALSE(none.folder);
  CHECK(none.restored_then_refused);
  CHECK(restores == 1);
  // An intact checkpoint is restored at once, and nothing was refused.
  save_state(dir, steps[0], 4, *comm);
  comm->barrier();
  restores = 0;
  const ck::CollectiveRestore fine = ck::restore_resume_checkpoint_collective(dir, *comm, {}, restore);
  REQUIRE(fine.folder);
  CHECK(*fine.folder == dir + "/step_00000004");
  CHECK_FALSE(fine.restored_then_refused);
  CHECK(restores == 1);
  CHECK(restored == steps[0].floats("ln_f.weight"));
  ck::ReadOptions off;
  off.verify_files = false;
  CHECK_THROWS_WITH(ck::restore_resume_checkpoint_collective(dir, *comm, off, restore),
                    Catch::Contains("verify_files is off"));
  comm->barrier();
}
