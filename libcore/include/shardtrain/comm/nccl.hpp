// Communicator (communicator.hpp) over NCCL, for ranks with one GPU each: the comm engine
// (transport.hpp) with the NCCL transport (libcore/src/comm/nccl_transport.cpp). Groups, sequence
// numbers, the flight recorder, timeouts and the canonical all-reduce are the engine's, as over
// MPI; NCCL carries the bytes.
//
// Transport: buffers are device memory of the rank's GPU (transport.hpp "Where buffers live"): the
// engine stages host buffers (loss sums, ids, manifests) to the device around each operation.
// Library collectives are ncclAllReduce / ncclReduceScatter / ncclAllGather on the transport's own
// stream, completion by a CUDA event per request. Point-to-point calls (the engine's canonical
// all-reduce and broadcast) are ncclSend/ncclRecv; NCCL has no tags and would deadlock a receive
// and a send to the same peer issued one after the other on one stream, so isend/irecv are queued
// and launched together, in one ncclGroupStart/ncclGroupEnd, at the next test_all or library call.
// NCCL cannot tell a receive that a message had another size: ranks that disagree on a size hang
// (the engine's timeout then names the operation) instead of failing at once as over MPI.
// Timeouts: the engine abandons the transport, which calls ncclCommAbort (no blocking teardown).
// Groups: split() is ncclCommSplit. NCCL refuses two ranks on one GPU: ranks sharing a GPU use
// the MPI transport with host staging (CommOptions::device_memory).
// Ordering: a device buffer must be complete when submitted (the trainers synchronise their
// compute queue before they hand gradients over, as for MPI).
#pragma once
#include <mpi.h>

#include <memory>

#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

// True when this build has the NCCL transport (CUDA build with NCCL found at configure time).
bool nccl_transport_available();

// Collective over `base` (MPI carries NCCL's unique id from rank 0): one NCCL communicator over
// the ranks of `base`, this rank on CUDA device `device_index`. Throws UsageError when the build
// has no NCCL, the device is not visible, or NCCL refuses (two ranks on one GPU, say so).
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm base, int device_index, CommOptions options);

}  // namespace shardtrain
