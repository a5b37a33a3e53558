// Communicator (communicator.hpp) over MPI, for CPU ranks: the comm engine (transport.hpp) with the
// MPI transport (libcore/src/comm/mpi_transport.cpp), and the MPI process's start and end. The comm
// layer is the only one that calls MPI (tests/scripts/check-layers.py refuses a call anywhere else in
// libcore or tools/): mpi_transport.cpp, mpi_process.cpp (below) and bare_mpi.cpp (a benchmark's
// bare yardstick, bare_mpi.hpp).
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

// The MPI process, for the one tool main that owns it (tool/tool.cpp's run_tool): MPI_Init_thread
// at MPI_THREAD_MULTIPLE (what every communicator needs), and the world's rank and size.
struct MpiProcess {
  int rank = 0, size = 1;
};
MpiProcess mpi_start(int& argc, char**& argv);
// At the end: a failing rank of a job of several calls MPI_Abort with its exit code (its peers
// would otherwise wait in their next collective until their timeouts); then MPI_Finalize.
void mpi_end(int exit_code, int world_size);
// MPI_COMM_WORLD's size: the job's ranks, known before any communicator exists (the trainers'
// layout check, refused before any collective).
int mpi_world_size();

}  // namespace shardtrain
