// The MPI process's start and end for the one tool main that owns them (mpi.hpp).
#include <mpi.h>

#include "shardtrain/comm/mpi.hpp"

namespace shardtrain {

MpiProcess mpi_start(int& argc, char**& argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MpiProcess p;
  MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p.size);
  return p;
}

void mpi_end(int exit_code, int world_size) {
  if (exit_code != 0 && world_size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  MPI_Finalize();
}

int mpi_world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace shardtrain
