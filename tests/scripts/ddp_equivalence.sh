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
  got=$(python3 -c "import json; print(json.load(open('$WORK/$run/summary.json'))['communication']['allreduce_algorithm'])")
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
  python3 - "$WORK/fast_$np" "$np" <<'PY' || fail "W=$np: step log or summary incomplete"
import json, sys
run, world = sys.argv[1], int(sys.argv[2])
columns = ["data_s", "fwd_s", "bwd_s", "comm_total_s", "comm_exposed_s", "comm_cpu_s", "opt_s", "ckpt_s", "step_s"]
fields = ["step", "rank", "tokens", "loss", "lr", "grad_norm", "config_hash", "data_snapshot_id", "code_version",
          "checkpoint_id"] + columns
for r in range(world):
    recs = [json.loads(l) for l in open(f"{run}/steps.rank{r}.jsonl")]
    assert [x["step"] for x in recs] == list(range(10)), f"rank {r}: steps {[x['step'] for x in recs]}"
    for x in recs:
        missing = [f for f in fields if f not in x]
        assert not missing, f"rank {r} step {x['step']}: missing {missing}"
        assert x["rank"] == r and all(x[c] >= 0 for c in columns), x
        assert x["comm_cpu_s"] <= x["comm_total_s"] + 1e-3, f"rank {r} step {x['step']}: cpu {x['comm_cpu_s']} > in flight {x['comm_total_s']}"
    assert sum(x["comm_cpu_s"] for x in recs) > 0, f"rank {r}: no communication CPU time recorded"
s = json.load(open(f"{run}/summary.json"))
for c in columns:
    t = s["per_rank_medians"][c]
    assert len(t["by_rank"]) == world and t["min"] <= t["median"] <= t["max"], (c, t)
comm = s["communication"]
assert 0 <= s["slowest_rank"] < world and comm["total_bytes"] > 0 and comm["total_cpu_s"] > 0, comm
assert comm["AllReduce"]["busbw_GBps"] > 0 and comm["bare_allreduce_busbw_GBps"] > 0, comm
assert s["speedup"] > 0 and abs(s["scaling_efficiency"] - s["speedup"] / world) < 1e-9, s
print(f"  W={world}: {world} step logs x 10 steps with {len(fields)} fields; E({world}) = {s['scaling_efficiency']:.3f}")
PY
done
pass "step logs and summaries complete on every rank"
# A different seed must not pass: the check can fail.
train 1 "$WORK/other_seed" --d-model 48 --steps 10 --global-batch 8 --micro-batch 2 --seed 99
expect_verdict DIFFERENT "$WORK/other_seed/params.h5" "$WORK/fast_1/params.h5" --atol 1e-6 --rtol 1e-4
pass "a different seed is DIFFERENT"
