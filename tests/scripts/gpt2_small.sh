#!/usr/bin/env bash
# GPT-2 small (124M parameters: --model gpt2-small) as the standard workload, on 2 ranks (issue 46):
#   data      a synthetic corpus at GPT-2's vocabulary (--symbols 50256: vocab 50257);
#   reference 2 steps with a checkpoint after each, the GEMM library measured (an empty cache);
#   kill      the same run with rank 1 SIGKILLed in step 1, then resumed from step_00000001:
#             its step_00000002 BITWISE the reference's (every tensor, moments included);
#   memory    each rank's summary memory (tracked categories, the comm engine's scratch included,
#             + the baseline before allocation) within 10% of its resident peak, so the summary
#             accounts for what the process held (the issue's bound; measured 4.9% on 2 ranks,
#             2026-12-06); and scale-bench plan's resident prediction for DDP at 2 ranks within 10%
#             of each rank's resident peak (measured 0.2%);
#   start-up  the summary's seconds from launch to the first step, bounded (see START_LIMIT).
# Micro-batch 1, context 1024, one thread per rank. About 1.5-2 minutes on two cores and 6.5 GB of
# disk at its peak (four checkpoints, removed when the test passes).
#
# Usage: gpt2_small.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
# The issue's figure is 10 s from launch to the first step on an idle 2-core machine (measured
# 8.9 s uncached, 8.0 s resumed); ctest runs other entries beside this one, so the test allows
# twice that and prints the figure.
START_LIMIT=${START_LIMIT:-20}
MEMORY_TOLERANCE=${MEMORY_TOLERANCE:-0.10}
export SHARDTRAIN_GEMM_CACHE="$WORK/gemm-cache"  # empty: the first run measures the libraries

G="$WORK/gpt2-vocab.h5"
"$BIN_DIR/data-prep" --synthetic markov --symbols 50256 --documents 3 --doc-tokens 3000 -o "$G" >"$WORK/data.log"
[ "$(jq -er .vocab "$WORK/data.log")" = 50257 ] || fail "the synthetic corpus is not at GPT-2's vocabulary"
M=(--data "$G" --model gpt2-small --micro-batch 1 --global-batch 2 --steps 2 --ckpt-every 1 --threads 1
   --log-every 1)
run2() {  # run2 RUN_DIR [options...]: the model on 2 ranks; returns mpirun's status
  local dir=$1; shift
  mpirun -np 2 --oversubscribe -x SHARDTRAIN_GEMM_CACHE "$BIN_DIR/ddp-train" "${M[@]}" --run-dir "$dir" "$@" \
    >"$dir.log" 2>&1
}

run2 "$WORK/ref" || { cat "$WORK/ref.log" >&2; fail "the reference run failed"; }
grep -q "124.44M-parameter decoder" "$WORK/ref.log" || fail "the run was not GPT-2 small's 124.44M parameters"
grep -q '"reason": *".*measured at start' <(jq '.gemm' "$WORK/ref/summary.json") ||
  fail "the first run did not measure the GEMM libraries (cache not empty?)"
pass "GPT-2 small, 2 ranks, 2 steps with checkpoints: $(jq -r '"\(.throughput_tokens_per_s|floor) tokens/s, MFU \(.mfu*100|floor)%"' "$WORK/ref/summary.json")"

rc=0; run2 "$WORK/kill" --inject kill:rank=1,step=1 || rc=$?
[ "$rc" -ne 0 ] || fail "the run with rank 1 killed exited 0"
[ "$(cat "$WORK/kill/checkpoints/latest")" = step_00000001 ] || fail "no step_00000001 before the kill"
run2 "$WORK/kill" --resume auto || { cat "$WORK/kill.log" >&2; fail "the resumed run failed"; }
grep -q "resumed from .*step_00000001" "$WORK/kill.log" || fail "the run did not resume from step_00000001"
expect_verdict BITWISE "$WORK/kill/checkpoints/step_00000002" "$WORK/ref/checkpoints/step_00000002"
pass "SIGKILL of rank 1 in step 1, resumed: step 2 BITWISE the uninterrupted run's"

for run in ref kill; do
  checks memory-accounted "$WORK/$run/summary.json" "$MEMORY_TOLERANCE" || fail "$run: memory not accounted within $MEMORY_TOLERANCE"
done
pass "memory: tracked + baseline within $MEMORY_TOLERANCE of each rank's resident peak"
"$BIN_DIR/scale-bench" plan --model gpt2-small --ranks 2 --micro-batch 1 --global-batch 2 --memory-per-rank 100GB \
  --busbw-GBps 10 --alpha-us 5 --json >"$WORK/plan.json" || fail "scale-bench plan --model gpt2-small"
checks plan-predicts-resident "$WORK/plan.json" DDP "$WORK/ref/summary.json" 0.10 || fail "the plan's memory is off the measured"
pass "scale-bench plan's resident memory for DDP on 2 ranks within 10% of each rank's resident peak"

start=$(jq -er '.startup.to_first_step_s' "$WORK/ref/summary.json")
echo "  start-up to the first step: $start s uncached ($(jq -c .startup "$WORK/ref/summary.json")), $(jq -er .startup.to_first_step_s "$WORK/kill/summary.json") s resumed"
awk -v s="$start" -v l="$START_LIMIT" 'BEGIN { exit !(s > 0 && s <= l) }' || fail "start-up $start s > $START_LIMIT s"
pass "start-up within $START_LIMIT s of launch"

# Four 1.5 GB checkpoints stay behind otherwise: a passing run gives the disk back (a failing one
# keeps them to look at).
rm -rf "$WORK/ref/checkpoints" "$WORK/kill/checkpoints"
