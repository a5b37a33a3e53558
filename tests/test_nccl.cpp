// The NCCL transport on a device at one rank ([gpu]: skipped without a CUDA device, main.cpp),
// and its refusals everywhere ([nccl]). One GPU can host only one NCCL rank, so the multi-rank
// algorithms over NCCL are proven on the fake device transport (test_comm_staging.cpp) and, with
// several GPUs, by gpu-check (its gpu_tests stage); here every NCCL call the engine makes runs once for real:
// ncclCommInitRank, the library collectives, the barrier, ncclCommSplit, staged host buffers.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <vector>

#include "shardtrain/backend/backend.hpp"
#include "shardtrain/backend/device_memory.hpp"
#include "shardtrain/base/error.hpp"
#include "shardtrain/comm/nccl.hpp"
#include "test_support.hpp"

using namespace shardtrain;

TEST_CASE("nccl transport: a build without NCCL or a device refuses with a usage error", "[nccl]") {
  if (nccl_transport_available() && cuda_backend_available()) return;  // the [gpu] case below runs instead
  test::ensure_mpi();
  CommOptions options;
  options.name = "nccl-refused";
  CHECK_THROWS_AS(make_nccl_communicator(MPI_COMM_SELF, 0, options), UsageError);
}

TEST_CASE("nccl transport: every engine operation at one rank on the device", "[gpu]") {
  REQUIRE(nccl_transport_available());  // a CUDA build finds NCCL beside the toolkit (CMake says so)
  test::ensure_mpi();
  CommOptions options;
  options.name = "nccl1";
  options.timeout = std::chrono::milliseconds(60000);
  auto comm = make_nccl_communicator(MPI_COMM_SELF, 0, options);
  REQUIRE(comm->size() == 1);
  auto memory = make_cuda_device_memory(0);
  const std::vector<float> x = test::random_floats(1000, 5);
  auto* device = static_cast<float*>(memory->allocate(x.size() * sizeof(float)));
  memory->to_device(device, x.data(), x.size() * sizeof(float));
  comm->all_reduce(device, x.size());            // ncclAllReduce
  comm->all_reduce_canonical(device, x.size());  // the engine's tree (nothing to add at one rank)
  std::vector<float> back(x.size());
  memory->to_host(back.data(), device, back.size() * sizeof(float));
  CHECK(test::bitwise_equal(back, x));
  auto* gathered = static_cast<float*>(memory->allocate(x.size() * sizeof(float)));
  comm->all_gather(device, gathered, x.size());      // ncclAllGather
  comm->reduce_scatter(gathered, device, x.size());  // ncclReduceScatter
  memory->to_host(back.data(), device, back.size() * sizeof(float));
  CHECK(test::bitwise_equal(back, x));
  double host_value = 2.5;  // a host buffer: staged to the device and back
  comm->all_reduce(&host_value, 1);
  CHECK(host_value == 2.5);
  comm->barrier();
  auto child = comm->split(0, 0, "nccl1-child");
  REQUIRE(child);
  CHECK(child->size() == 1);
  int ids[2] = {7, 9};
  child->broadcast(ids, 2, 0);
  CHECK((ids[0] == 7 && ids[1] == 9));
  child->all_reduce(device, x.size());
  CHECK(comm->stats().all_reduce_algorithm == "nccl");
  memory->release(device);
  memory->release(gathered);
}
