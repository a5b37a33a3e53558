#!/usr/bin/env bash
# Restart time at scale: a ~100M-parameter decoder (d_model 768, 12 layers; state = parameters +
# two AdamW moments = 1.0 GB fp32) trained on NP ranks under scripts/run-resilient.sh with a
# checkpoint every 2 steps; rank 1 (or 0 on one rank) is SIGKILLed after step 3. Prints the
# synchronous save time and bandwidth of each checkpoint, and the restart time (relaunch to the
# first completed resumed step, from restarts.json), and the training stall of each save (ckpt_s).
#
# Usage: scripts/bench-restart.sh [NP] [--async-ckpt]     (default 2 ranks)
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
np="${1:-2}"; shift || true
work="$tmp"
victim=$((np > 1 ? 1 : 0))
kill_after_step "$work/run/steps.rank$victim.jsonl" 2 &
"$here/scripts/run-resilient.sh" --max-restarts 1 --backoff 0 --log "$work/restarts.json" -- \
  mpirun -np "$np" "$build/bin/ddp-train" --data "$here/data/fortunes.h5" --d-model 768 --layers 12 --heads 12 \
  --seq-len 256 --micro-batch 1 --global-batch "$np" --steps 6 --ckpt-every 2 --keep 2 --peak-gflops 200 \
  --run-dir "$work/run" "$@" >"$work/out.log" 2>&1
grep -E "checkpoint: committed|resume: using" "$work/out.log" | sed 's/^/  /'
figures restart "$work/run/steps.rank0.jsonl" "$work/restarts.json"
