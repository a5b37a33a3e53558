#!/usr/bin/env bash
# release-gate eval's cost against training, side by side in one run: the demo's one-rank training
# (the demo model: 4 layers, d_model 256, seq_len 256, 160 steps of 8 sequences on the fortunes
# corpus, cutoff 2019-01-01) with a checkpoint at the end, then `release-gate eval` of that
# checkpoint on the fortunes hold-out (the default 128 sequences, spread over the owners). Prints
# the training time, the evaluation time and their ratio (the goal: under 10%), the evaluated and
# forward tokens per second and the latency.
#
# Usage: scripts/bench-release-gate.sh [extra ddp-train options, e.g. --steps 80]
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
[ -x "$build/bin/release-gate" ] || "$here/scripts/setup.sh"
cutoff=2019-01-01T00:00:00Z
mpirun -np 1 "$build/bin/ddp-train" "${foundation[@]}" --cutoff "$cutoff" --lr 2e-3 --warmup 20 --eval-samples 128 \
  --global-batch 8 --steps 160 --eval-every 80 --ckpt-every 160 --run-dir "$tmp/one" "$@" >"$tmp/train.log" 2>&1 ||
  { cat "$tmp/train.log"; exit 1; }
"$build/bin/release-gate" eval "$tmp/one/checkpoints" --data "$here/data/fortunes.h5" --cutoff "$cutoff" \
  --json "$tmp/eval.json" 2>"$tmp/eval.log" || { cat "$tmp/eval.log"; exit 1; }
figures release-gate "$tmp/one/summary.json" "$tmp/eval.json"
