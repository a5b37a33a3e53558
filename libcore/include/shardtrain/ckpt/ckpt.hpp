// Checkpoints (contracts 3, 5, 6 of docs/ARCHITECTURE.md): complete, atomic, validated, layout-independent.
//
//   format.hpp  on-disk layout, TensorSpec / PieceView, CheckpointManifest, spread_pieces
//               (replicated tensors written once, spread over ranks), sum64 tensor checksum
//   write.hpp   save_checkpoint (collective, synchronous), AsyncCheckpointWriter (host snapshot,
//               background thread on a communicator group of its own, "ckpt")
//   read.hpp    CheckpointReader (validate, manifest, read whole tensors or flat ranges)
//   commit.hpp  fsync/rename helpers, `latest`, find_resume_checkpoint (--resume auto),
//               prune_checkpoints (--keep K)
//
// Typical trainer use (DDP, every rank holds everything; `comm` is the job's Communicator, e.g.
// make_mpi_communicator(MPI_COMM_WORLD, options): every checkpoint collective goes through it):
//
//   using namespace shardtrain::ckpt;
//   std::vector<TensorSpec> specs; std::vector<const void*> ptrs;
//   for (auto& p : registry.tensors()) { specs.push_back({p.name, p.shape}); ptrs.push_back(params + p.offset); }
//   for (auto& p : registry.tensors()) { specs.push_back({"optim.exp_avg." + p.name, p.shape}); ptrs.push_back(m + p.offset); }
//   for (auto& p : registry.tensors()) { specs.push_back({"optim.exp_avg_sq." + p.name, p.shape}); ptrs.push_back(v + p.offset); }
//   auto pieces = spread_pieces(specs, ptrs, world, rank);       // each element written by one rank
//   CheckpointManifest m; m.step = step + 1; ... fill the trainer fields ...
//   save_checkpoint(dir, m, specs, pieces, comm, {.keep = K});                    // synchronous
//   AsyncCheckpointWriter writer(dir, comm, {.keep = K});  // once, at start-up (collective)
//   double stall = writer.save(m, specs, pieces);  ... each step: writer.poll();  // asynchronous
//
//   // --resume auto
//   ReadOptions ro; ro.expected_model = model_config.to_json();
//   auto folder = find_resume_checkpoint_collective(dir, comm, ro);
//   if (folder) { ro.verify_files = false;  // rank 0 hashed every file while choosing it
//                 CheckpointReader r(*folder, ro);  // still checks sizes, manifest, config, coverage
//                 r.read(name, params + p.offset); ...  // whole tensor: sum64 verified
//                 restore step, sampler, RNG, LR position from r.manifest() }
#pragma once
#include "shardtrain/ckpt/commit.hpp"
#include "shardtrain/ckpt/format.hpp"
#include "shardtrain/ckpt/read.hpp"
#include "shardtrain/ckpt/write.hpp"
