#!/usr/bin/env bash
# Checkpoints through ddp-train (contract 5 of docs/ARCHITECTURE.md): resume continues bitwise (same and other world
# size, synchronous and asynchronous saves), SIGTERM saves at a step boundary and stops cleanly,
# a corrupt newest checkpoint is skipped loudly for the previous good one, and resumes that would
# change the training problem are refused with a message.
#
# Usage: ckpt_resume.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
C=(--d-model 32 --global-batch 8 --micro-batch 2 --deterministic)

train 2 "$WORK/full" "${C[@]}" --steps 12
# (1) stop after 5 steps with a checkpoint, resume on 2 and on 4 ranks.
train 2 "$WORK/same" "${C[@]}" --steps 5 --ckpt-every 5
cp -r "$WORK/same" "$WORK/resized"
train 2 "$WORK/same" "${C[@]}" --steps 12 --resume auto
train 4 "$WORK/resized" "${C[@]}" --steps 12 --resume auto
grep -q "written by 2 ranks (grad_accum 2 -> 1)" "$WORK/resized.log" || fail "the resized resume did not say so"
for d in same resized; do
  expect_verdict BITWISE "$WORK/$d/params.h5" "$WORK/full/params.h5"
done
pass "resume at step 5 continues bitwise on 2 and on 4 ranks"

# (2) asynchronous saves give the same checkpoint bytes' tensors as synchronous ones.
train 2 "$WORK/async" "${C[@]}" --steps 12 --ckpt-every 4 --async-ckpt
train 2 "$WORK/sync" "${C[@]}" --steps 12 --ckpt-every 4
expect_verdict BITWISE "$WORK/async/checkpoints/step_00000008/index.h5" "$WORK/sync/checkpoints/step_00000008/index.h5" --group tensors
checks ckpt-stalls "$WORK/async/steps.rank0.jsonl" || fail "the asynchronous saves logged no stall"
pass "asynchronous saves: same tensors, stall logged in ckpt_s"

# h5dump (plain HDF5 tools, no shardtrain code) reads a whole logical tensor from the index, and it
# equals the trainer's final value of that tensor.
for t in wte.weight h.1.attn.qkv.weight; do
  h5dump -A 0 -d "/tensors/$t" "$WORK/sync/checkpoints/step_00000012/index.h5" | sed -n '/DATA {/,/}/p' >"$WORK/idx_$t.txt"
  h5dump -A 0 -d "/params/$t" "$WORK/sync/params.h5" | sed -n '/DATA {/,/}/p' >"$WORK/par_$t.txt"
  [ -s "$WORK/idx_$t.txt" ] && cmp -s "$WORK/idx_$t.txt" "$WORK/par_$t.txt" || fail "h5dump of /tensors/$t differs from the trainer's value"
done
pass "h5dump reads whole tensors from index.h5 equal to the trainer's final parameters"

# (3) SIGTERM: save at the next step boundary, stop cleanly (exit 0), resume bitwise.
mpirun -np 2 "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 --peak-gflops 100 --log-every 1 \
  --run-dir "$WORK/sig" "${C[@]}" --steps 100000 --decay-steps 500 >"$WORK/sig.log" 2>&1 &
launcher=$!
for _ in $(seq 1 200); do [ -s "$WORK/sig/steps.rank0.jsonl" ] && [ "$(wc -l <"$WORK/sig/steps.rank0.jsonl")" -ge 3 ] && break; sleep 0.05; done
kill -TERM "$(tail -n 1 "$WORK/sig/steps.rank1.jsonl" | jq -er .pid)"  # rank 1's pid, from its newest step record
rc=0; wait $launcher || rc=$?
[ "$rc" -eq 0 ] || { cat "$WORK/sig.log" >&2; fail "SIGTERM stop exited $rc"; }
grep -q "stop signal: saved step" "$WORK/sig.log" || fail "no stop line"
saved=$(cat "$WORK/sig/checkpoints/latest")
echo "  SIGTERM to rank 1: saved $saved and stopped (exit 0)"
n=$((10#${saved#step_}))
train 2 "$WORK/sig" "${C[@]}" --resume auto --steps $((n + 3)) --decay-steps 500
train 2 "$WORK/sig_ref" "${C[@]}" --steps $((n + 3)) --decay-steps 500
expect_verdict BITWISE "$WORK/sig/params.h5" "$WORK/sig_ref/params.h5"
pass "SIGTERM saves at a step boundary, exits 0, and the resume continues bitwise"

# (4) A corrupt newest checkpoint: resume auto names it and falls back to the previous one.
train 1 "$WORK/corrupt" "${C[@]}" --steps 6 --ckpt-every 3
checks flip-byte "$WORK/corrupt/checkpoints/step_00000006/rank_00000.h5"
train 1 "$WORK/corrupt" "${C[@]}" --steps 6 --resume auto
grep -E "skip|corrupt|checksum" "$WORK/corrupt.log" | head -2
grep -q "step_00000006" "$WORK/corrupt.log" && grep -q "resumed from .*step_00000003" "$WORK/corrupt.log" ||
  { cat "$WORK/corrupt.log" >&2; fail "did not fall back loudly to step_00000003"; }
pass "a flipped byte in the newest checkpoint: skipped loudly, resumed from the previous one"

# (4b) No valid checkpoint behind a refused one: a resume reads a checkpoint while it validates it,
# so a fault those reads find leaves their bytes in the model's state; with nothing older to
# restore, the state is built afresh and the run equals one that never had a checkpoint.
train 2 "$WORK/allbad" "${C[@]}" --steps 3 --ckpt-every 3
checks flip-byte "$WORK/allbad/checkpoints/step_00000003/rank_00001.h5"
train 2 "$WORK/allbad" "${C[@]}" --steps 6 --resume auto
grep -q "building it afresh" "$WORK/allbad.log" && grep -q "starting from step 0" "$WORK/allbad.log" ||
  { cat "$WORK/allbad.log" >&2; fail "a refused checkpoint's reads were not discarded loudly"; }
train 2 "$WORK/fresh6" "${C[@]}" --steps 6
expect_verdict BITWISE "$WORK/allbad/params.h5" "$WORK/fresh6/params.h5"
pass "the only checkpoint refused after it was read: the state built afresh, the run equals a fresh one"

# (5) Refusals: another global batch, another data selection (unless --allow-data-change).
rc=0; train 2 "$WORK/same" --d-model 32 --global-batch 16 --micro-batch 2 --deterministic --steps 14 --resume "$WORK/same/checkpoints/step_00000005" 2>/dev/null || rc=$?
grep -q "global batch 8 in the checkpoint vs --global-batch 16" "$WORK/same.log" && [ "$rc" -eq 2 ] || fail "another global batch was not refused (exit $rc)"
pass "another global batch refused (exit 2)"
rc=0; train 2 "$WORK/same" "${C[@]}" --steps 14 --cutoff 2024-01-10T00:00:00Z --resume "$WORK/same/checkpoints/step_00000005" 2>/dev/null || rc=$?
grep -q "allow-data-change" "$WORK/same.log" && [ "$rc" -eq 2 ] || fail "a data change was not refused (exit $rc)"
train 2 "$WORK/same" "${C[@]}" --steps 14 --cutoff 2024-01-10T00:00:00Z --resume "$WORK/same/checkpoints/step_00000005" --allow-data-change
pass "a changed data selection refused without --allow-data-change, accepted with it"
