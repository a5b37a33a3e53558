// The MPI library's own blocking collectives over MPI_COMM_WORLD, bare: no queue, no sequence
// number, no timeout, no flight record. Only for a benchmark's yardstick: scale-bench collectives'
// "mpi" rows, and the barriers and reductions that keep its ranks in step and gather its timings.
// Every collective of a job goes through a Communicator (contract 6); no file outside the comm
// layer calls MPI (tests/scripts/check-layers.py, ctest layering, refuses one).
//
// Buffers are float32 host memory; counts are elements (each below 2^31, MPI's int). Collective:
// every rank of the world calls each function in the same order.
#pragma once
#include <cstddef>
#include <cstdint>

namespace shardtrain::bare_mpi {

int world_rank();
int world_size();
void barrier();
void all_reduce_sum(float* data, std::size_t count);                      // in place
void reduce_scatter_sum(const float* in, float* out, std::size_t block);  // in: world x block, out: block
void all_gather(const float* in, float* out, std::size_t block);          // in: block, out: world x block
void broadcast(float* data, std::size_t count, int root);
double max(double x);                 // over the ranks
int max(int x);                       // over the ranks
std::uint64_t sum(std::uint64_t x);   // over the ranks

}  // namespace shardtrain::bare_mpi
