#include "shardtrain/comm/bare_mpi.hpp"

#include <mpi.h>

namespace shardtrain::bare_mpi {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

void all_reduce_sum(float* data, std::size_t count) {
  MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

void reduce_scatter_sum(const float* in, float* out, std::size_t block) {
  MPI_Reduce_scatter_block(in, out, int(block), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

void all_gather(const float* in, float* out, std::size_t block) {
  MPI_Allgather(in, int(block), MPI_FLOAT, out, int(block), MPI_FLOAT, MPI_COMM_WORLD);
}

void broadcast(float* data, std::size_t count, int root) { MPI_Bcast(data, int(count), MPI_FLOAT, root, MPI_COMM_WORLD); }

double max(double x) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return x;
}

int max(int x) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return x;
}

std::uint64_t sum(std::uint64_t x) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return x;
}

}  // namespace shardtrain::bare_mpi
