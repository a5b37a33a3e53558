// nccl.hpp in builds without NCCL (CPU-only, or NCCL not found at configure time).
#include "shardtrain/comm/nccl.hpp"

namespace shardtrain {

bool nccl_transport_available() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm, int, CommOptions) {
  throw UsageError("the NCCL transport is not in this build (CPU-only, or NCCL was not found at configure time); "
                   "use --transport mpi");
}

}  // namespace shardtrain
