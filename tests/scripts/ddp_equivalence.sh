#!/usr/bin/env bash
# Contract 2 end to end: after 10 steps at the same global batch, deterministic runs on W = 1, 2
# and 4 ranks (4 oversubscribed on 2 cores) have BITWISE-equal parameters and losses, at two model
# sizes; fast-mode runs (bucketed all-reduce overlapped with backward, by point-to-point
# halving/doubling, the default on power-of-two ranks, and by the MPI library's MPI_Iallreduce with
# --allreduce mpi) are WITHIN tolerance of the 1-rank run.
#
# Fast-mode tolerance, per element |a - b| <= 1e-6 + 1e-4 |b| on parameters (|b| <= ~1): only the
# order of fp32 gradient sums differs (relative ~1e-7), which Adam turns into parameter
# differences of at most a few 1e-9 over 10 steps (measured 7.5e-9); a real bug (a gradient
# averaged over the wrong count, a bucket missed) moves parameters by ~lr = 1e-3 per step.
# Losses: rtol 1e-6 (measured 2.6e-9).
#
# Usage: ddp_equivalence.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
for size in 32 64; do
  for np in 1 2 4; do
    train "$np" "$WORK/det${size}_$np" --d-model "$size" --steps 10 --global-batch 8 --micro-batch 2 \
      --deterministic --check-replicas 5
  done
  for np in 2 4; do
    expect_verdict BITWISE "$WORK/det${size}_1/params.h5" "$WORK/det${size}_$np/params.h5"
    expect_verdict BITWISE "$WORK/det${size}_1/steps.rank0.jsonl" "$WORK/det${size}_$np/steps.rank0.jsonl"
  done
  pass "d_model $size: deterministic W=1,2,4 bitwise equal"
done
for np in 1 2 4; do
  baseline=()
  [ "$np" -gt 1 ] && baseline=(--baseline "$WORK/fast_1/summary.json")
  train "$np" "$WORK/fast_$np" --d-model 48 --steps 10 --global-batch 8 --micro-batch 2 --bucket-mb 0.05 "${baseline[@]}"
done
for np in 2 4; do
  train "$np" "$WORK/mpi_$np" --d-model 48 --steps 10 --global-batch 8 --micro-batch 2 --bucket-mb 0.05 --allreduce mpi
done
for run in fast_2 fast_4 mpi_2 mpi_4; do
  expect_verdict WITHIN "$WORK/$run/params.h5" "$WORK/fast_1/params.h5" --atol 1e-6 --rtol 1e-4
  expect_verdict WITHIN "$WORK/$run/steps.rank0.jsonl" "$WORK/fast_1/steps.rank0.jsonl" --rtol 1e-6
  want=halving; [[ $run == mpi_* ]] && want=mpi
  got=$(jq -r .communication.allreduce_algorithm "$WORK/$run/summary.json")
  [ "$got" = "$want" ] || fail "$run: all-reduce algorithm $got, expected $want"
done
pass "fast mode W=2,4 within tolerance of W=1 with both all-reduce algorithms"
rc=0
train 2 "$WORK/bad_algo" --d-model 48 --steps 1 --global-batch 8 --micro-batch 2 --allreduce ring 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "--allreduce ring exited $rc, expected 2"
grep -q "not one of auto, halving, mpi" "$WORK/bad_algo.log" || fail "--allreduce ring: no message naming the choices"
pass "an unknown --allreduce is refused with exit 2"
# Telemetry (contract 7 of docs/ARCHITECTURE.md): every rank's step log has every column and identity on every step, the
# communication thread's CPU time never exceeds the time its collectives were in flight, and the
# summary has per-rank statistics of every column, the slowest rank, bytes, bus bandwidth beside
# the bare all-reduce, and speedup and E(W) against the baseline.
for np in 2 4; do
  checks telemetry "$WORK/fast_$np" "$np" --steps 10 || fail "W=$np: step log or summary incomplete"
done
pass "step logs and summaries complete on every rank"
# A different seed must not pass: the check can fail.
train 1 "$WORK/other_seed" --d-model 48 --steps 10 --global-batch 8 --micro-batch 2 --seed 99
expect_verdict DIFFERENT "$WORK/other_seed/params.h5" "$WORK/fast_1/params.h5" --atol 1e-6 --rtol 1e-4
pass "a different seed is DIFFERENT"
