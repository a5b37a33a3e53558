// ckpt-reshard's rewrite: a checkpoint (or consolidated file) -> a checkpoint laid out for another
// parallel layout, whose rank file r holds exactly the pieces rank r of the target job owns
// (state_layout.hpp, the same function the trainers write with), so each target rank reads one
// local file. Parameters, both AdamW moments and the whole manifest (step, sampler, LR position,
// RNG, data snapshot) carry over unchanged; layout, grad_accum (= global_batch / (micro_batch x DP),
// DP = W / T, contract 1 of docs/ARCHITECTURE.md), writers, files, checksums and created are rewritten, and the source's layout is
// appended to manifest.history. Elements are copied bit for bit (no dtype conversion).
#pragma once
#include <cstdint>
#include <string>

#include "shardtrain/ckpt/ckpt.hpp"
#include "shardtrain/comm/communicator.hpp"
#include "shardtrain/parallel/state_layout.hpp"

namespace shardtrain {

// The refusals that depend on the source (UsageError, one line naming the numbers): a target the
// state cannot be split into (global_batch not a multiple of micro_batch x DP), a model config
// the registry rejects or one that cannot be split target.tp ways (heads, 4C), source tensors other than the model's state (missing, extra, another
// shape) or not float32 (the trainers' state: a conversion would lose moment precision).
void check_reshard_target(const ckpt::TensorSource& source, const StateLayout& target);

struct ReshardResult {
  std::string folder;             // <out>/step_<N>
  int files = 0;                  // target rank files (= target.world)
  std::int64_t tensor_bytes = 0;  // logical bytes of the state
  std::int64_t bytes_total = 0;   // bytes of the new checkpoint (rank files + index)
  double seconds = 0;             // this call, on rank 0: validation + read + write + commit
  // This process's share, in seconds: reading its target files' pieces from the source, writing
  // them (to the page cache), fsync overlapped with hashing, and the commit (gather, checks, index).
  double read_s = 0, write_s = 0, sync_s = 0, commit_s = 0;
};

// Collective over `comm` (any number of processes; process p writes target files p, p+P, ...).
// `source`: a step_<N> folder, a checkpoint directory or a consolidated file (open_tensor_source);
// rank 0 checks its structure first and hashes every rank file (SHA-256) while the target is
// written (the commit waits for that verdict); the others open it after rank 0's first verdict.
// target.zero_stage < 0 keeps the source's stage.
// `out`: the new checkpoint directory (step_<N>/ and `latest` inside, ready for --ckpt-dir DIR
// --resume auto); it must not exist. The new checkpoint is committed only if every tensor's sum64
// as written equals the source's (an end-to-end check of what was read).
// Throws UsageError (exit 2) for a source failing validation, an existing `out`, or a refused target;
// IoError for a write failure (nothing committed).
ReshardResult reshard_checkpoint(const std::string& source, const std::string& out, const StateLayout& target,
                                 Communicator& comm);

}  // namespace shardtrain
