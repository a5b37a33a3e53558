// Communicator (communicator.hpp) over MPI, for CPU ranks: the comm engine (transport.hpp) with the
// MPI transport (libcore/src/comm/mpi_transport.cpp, the only file of the layer that calls MPI).
//
// Thread level: MPI must be initialised with MPI_THREAD_MULTIPLE (the tool main and the tests do):
// each communicator runs its MPI calls on its own communication thread, several communicators
// (world, dp, tp groups) run concurrently, and the caller's thread may still call MPI (the tool's
// MPI_Abort on error, MPI_Comm_* set-up). make_mpi_communicator checks MPI_Query_thread and
// throws UsageError naming the level it got.
//
// Transport: each communicator owns a private duplicate of the given MPI communicator. Library
// collectives are issued non-blocking (MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Iallgather,
// MPI_Ibcast, MPI_Ibarrier) and driven by MPI_Test on the communication thread; the canonical
// all-reduce, and the fast one on floating-point data where CommOptions::all_reduce selects
// halving/doubling (the default on power-of-two groups), is point-to-point (MPI_Isend/MPI_Irecv,
// one tag per sequence number and round). So a
// timed-out operation can be abandoned and the thread still stops: a failed communicator does not
// keep the process from finalising (its MPI communicator and request are leaked on purpose).
#pragma once
#include <memory>

#include <mpi.h>

#include "shardtrain/comm/communicator.hpp"

namespace shardtrain {

// Collective over `base` (MPI_Comm_dup). Throws UsageError when MPI is not initialised or not at
// MPI_THREAD_MULTIPLE. Sets MPI_ERRORS_RETURN on `base` and MPI_COMM_WORLD: no MPI error ends a rank
// from inside the library (its group fails, with a flight record, and the tool exits on its own).
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm base, CommOptions options);

// A FatalHook for tools: logs nothing more (the timeout line is already out) and calls
// MPI_Abort(MPI_COMM_WORLD, 4), which ends every rank of the job. For tool mains and the trainer
// only; never call it from library code paths that could recover.
FatalHook mpi_abort_on_fatal();

}  // namespace shardtrain
