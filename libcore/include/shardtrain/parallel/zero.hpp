// ZeRO stages 1-3 (fsdp-train): the model state sharded over the data-parallel ranks.
//
//   stage 1: AdamW moments sharded. Every rank keeps full parameters and gradients; gradients are
//            reduce-scattered per unit (fp32 in fast mode, exact 64-bit sums in deterministic mode), each rank
//            updates its shard of the parameters with its shard of the moments, then an all-gather
//            per unit restores the full parameters.
//   stage 2: gradients sharded too: a unit's gradient lives in a transient unsharded buffer from
//            its backward until its reduce-scatter completes (launched as soon as backward has
//            completed the unit), then only this rank's shard is kept.
//   stage 3: parameters sharded too (FSDP): each unit is all-gathered just before its forward and
//            again before its backward (the next unit's all-gather prefetched asynchronously
//            while the current one computes) and freed after use; --no-reshard-after-forward
//            keeps a block gathered from its forward to its backward. The embeddings (tied to the
//            LM head, needed first in forward and last in backward) and ln_f stay gathered from
//            their forward to the end of their backward.
//
// Shards (ShardLayout): per sharding unit (ParameterRegistry::units(): embeddings, h.<l>, ln_f)
// the unit's flat range padded with zeros to a multiple of W x Backend::kReductionChunk; rank r
// owns the r-th of W equal slices. So every shard starts at a chunk boundary of its unit and the
// global gradient norm is rebuilt bitwise from per-chunk sums of squares (contract 2 of docs/ARCHITECTURE.md): each rank
// computes the chunk sums of its shards, they are all-gathered and added left to right per unit,
// then units in order, exactly as grad_norm_squared does over a full buffer.
//
// Deterministic mode (contract 2): per unit, each micro-batch's gradient joins the unit's exact
// fixed-point sum (exact_sum.hpp, the rule DDP uses, one segment per unit); after the last
// micro-batch the ranks agree the per-chunk grids (a small blocking all-gather), reduce-scatter
// the 64-bit words asynchronously and each decodes its slice to fp32. With the sharded norm above
// and the same elementwise AdamW, ZeRO-1/2/3 at any W and accumulation count are bitwise equal to
// DDP at W = 1 with the same global batch and micro-batch.
//
// Checkpoints: each rank writes its shard's pieces of every logical tensor (params, both moments;
// padding left out), so DDP and ZeRO runs resume from each other's checkpoints (contract 3).
//
// Memory: every buffer the strategy allocates is a TrackedArray attributed to one category; the
// tracker keeps the current and peak bytes of each (memory_report()).
#pragma once
#include <memory>

#include "shardtrain/parallel/memory.hpp"
#include "shardtrain/parallel/shard_layout.hpp"
#include "shardtrain/parallel/strategy.hpp"

namespace shardtrain {

// options.zero_stage is 1, 2 or 3 (run_training validates it where the options enter).
std::unique_ptr<TrainingStrategy> make_zero_strategy(Backend& backend, Communicator& comm, const ModelConfig& model,
                                                     const OptimizerConfig& optimizer, const StrategyOptions& options);

}  // namespace shardtrain
