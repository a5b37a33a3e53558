// Asynchronous checkpoints: the snapshot is a copy (training may change its tensors right after
// save() returns), a second save waits for the first, and a failed background write surfaces at
// poll(). The [mpi] case runs under mpirun -np 1, 2, 4 (background collectives on the writer's own
// group, split from the job's communicator, while the main thread keeps all-reducing on the latter).
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "shardtrain/base/error.hpp"
#include "test_ckpt_support.hpp"

namespace ck = shardtrain::ckpt;
namespace fs = std::filesystem;
using namespace shardtrain::test;
using namespace shardtrain::test::ckpt_fixture;

TEST_CASE("ckpt: async writer round trip while the main thread keeps communicating", "[mpi][ckpt]") {
  const auto [rank, world, dir, comm] = mpi_case("ckpt-async");
  auto state = make_state(10);
  const auto original = state;
  {
    const std::uint64_t seq_before = comm->next_seq();
    ck::AsyncCheckpointWriter writer(dir, *comm);
    CHECK(comm->next_seq() == seq_before + 1);  // the split of the writer's group, nothing else
    auto pieces = ck::spread_pieces(state.specs, state.pointers(), world, rank);
    const double stall = writer.save(make_manifest(3, world), state.specs, pieces);
    CHECK(stall >= 0);
    // "Training" goes on: the tensors change and the main thread runs collectives.
    for (auto& d : state.data) std::fill(d.begin(), d.end(), 0xAB);
    for (int i = 0; i < 20; ++i) {
      std::int32_t sum = 1;
      comm->all_reduce(&sum, 1);
      REQUIRE(sum == world);
      (void)writer.poll();
    }
    // A second save waits for the first, then writes the changed state.
    pieces = ck::spread_pieces(state.specs, state.pointers(), world, rank);
    writer.save(make_manifest(4, world), state.specs, pieces);
    const auto r = writer.wait();
    REQUIRE(r);
    CHECK(r->step == 4);
    CHECK(r->snapshot_s >= 0);
    CHECK_FALSE(writer.busy());
    // The two saves' collectives ran on the writer's group: the job's group saw only its own 20.
    CHECK(comm->next_seq() == seq_before + 1 + 20);
  }
  ck::CheckpointReader first(dir + "/step_00000003");
  for (std::size_t i = 0; i < original.specs.size(); ++i) {
    std::vector<unsigned char> back(original.data[i].size());
    first.read(original.specs[i].name, back.data());
    CHECK(back == original.data[i]);  // the snapshot, not the later values
  }
  ck::CheckpointReader second(dir + "/step_00000004");
  CHECK(second.read_floats("wte") == state.floats("wte"));
  CHECK(ck::read_latest(dir) == "step_00000004");
  comm->barrier();
}

TEST_CASE("ckpt: a failed background save surfaces at poll()", "[ckpt]") {
  const auto self = test_communicator(MPI_COMM_SELF);
  const std::string root = temp_dir("ckpt-async-fail");
  // A checkpoint folder under a regular file cannot be created, even by root.
  std::ofstream(root + "/not_a_folder") << "x";
  const std::string dir = root + "/not_a_folder/ckpt";
  const auto state = make_state(11);
  ck::AsyncCheckpointWriter writer(dir, *self);
  writer.save(make_manifest(1, 1), state.specs, ck::spread_pieces(state.specs, state.pointers(), 1, 0));
  std::string message;
  for (int step = 0; step < 500 && message.empty(); ++step) {
    try {
      (void)writer.poll();
    } catch (const shardtrain::IoError& e) {
      message = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(contains(message, dir));
  CHECK_FALSE(writer.busy());
  CHECK_NOTHROW(writer.wait());  // reported once

  // Once the folder is usable again the writer works.
  const std::string good = root + "/ckpt";
  ck::AsyncCheckpointWriter second(good, *self);
  second.save(make_manifest(2, 1), state.specs, ck::spread_pieces(state.specs, state.pointers(), 1, 0));
  REQUIRE(second.wait());
  CHECK(ck::validate_checkpoint(good + "/step_00000002").empty());
}

TEST_CASE("ckpt: a failed save is rethrown by the next save() too", "[ckpt]") {
  const auto self = test_communicator(MPI_COMM_SELF);
  const std::string root = temp_dir("ckpt-async-fail2");
  std::ofstream(root + "/file") << "x";
  const auto state = make_state(12);
  ck::AsyncCheckpointWriter writer(root + "/file/ckpt", *self);
  const auto pieces = ck::spread_pieces(state.specs, state.pointers(), 1, 0);
  writer.save(make_manifest(1, 1), state.specs, pieces);
  CHECK_THROWS_AS(writer.save(make_manifest(2, 1), state.specs, pieces), shardtrain::IoError);
}
