#!/usr/bin/env bash
# One definition of the hold-out (issue 22): the trainer's hold-out loss (summary.json
# eval.holdout_loss) and release-gate eval's (evaluation.json scores.loss) for the same checkpoint,
# data, cutoff and sample count are the same number, bit for bit: both score the samples of
# data::spread_holdout_samples through train/evaluation.hpp's loop and stats/token_loss.hpp.
# Checked for a 2-rank DDP run, a 2-rank ZeRO-3 run (the trainer gathers the full model for the
# evaluation) and a 2-rank ZeRO-1 run (rank 0 scores with the strategy's own model, which reads the
# replicated parameters where they lie), at a sample count that does not divide evenly over the
# owner slices.
# Usage: holdout_agreement.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"

# Two owners, one document a day from 2024-01-01 each (data-prep's synthetic JSONL), cutoff on the
# 12th: the hold-out is both owners' later documents.
"$BIN_DIR/data-prep" --synthetic markov --seed 3 --documents 20 --doc-tokens 1200 -o "$WORK/m.h5" \
  --synthetic-jsonl "$WORK/m.jsonl" >/dev/null 2>&1 || fail "data-prep --synthetic"
checks relabel-owners "$WORK/m.jsonl" "$WORK/two-owners.jsonl" alice bob
"$BIN_DIR/data-prep" "$WORK/two-owners.jsonl" -o "$WORK/data.h5" --vocab 17 --tokenizer markov16 --separator 16 \
  >/dev/null 2>&1 || fail "data-prep two-owners.jsonl"
cutoff=2024-01-12T00:00:00Z
samples=13   # 6 per owner slice (13 / 2), spread over each slice
check() {  # check NAME TOOL [options...]
  local name=$1 tool=$2; shift 2
  local dir="$WORK/$name"
  mkdir -p "$dir"
  mpirun -np 2 --oversubscribe "$BIN_DIR/$tool" --data "$WORK/data.h5" --cutoff "$cutoff" --seq-len 32 --layers 2 \
    --heads 2 --d-model 32 --global-batch 8 --micro-batch 4 --steps 8 --ckpt-every 8 --eval-samples "$samples" \
    --peak-gflops 100 --log-every 1000 --run-dir "$dir" "$@" >"$dir.log" 2>&1 || { cat "$dir.log"; fail "$tool"; }
  "$BIN_DIR/release-gate" eval "$dir/checkpoints" --data "$WORK/data.h5" --cutoff "$cutoff" --max-samples "$samples" \
    --batch 4 --latency-runs 2 --json "$dir/evaluation.json" >"$dir.eval.log" 2>&1 || { cat "$dir.eval.log"; fail "release-gate eval"; }
  checks holdout-agreement "$dir/summary.json" "$dir/evaluation.json" "$name" || fail "$name: the two hold-out losses differ"
  pass "$name: the trainer's hold-out loss equals release-gate eval's, bit for bit (per owner too)"
}
check ddp ddp-train
check zero3 fsdp-train --zero-stage 3
check zero1 fsdp-train --zero-stage 1
