#!/usr/bin/env bash
# equiv-check on checkpoint folders (issue 23): one deterministic run on 1 rank (DDP) and on 2 ranks
# (ZeRO-3: parameters and moments sharded, other rank files): every logical tensor, parameters and
# optimizer moments, BITWISE, named by a checkpoint folder (its `latest`) or a step_<N> folder;
# another step of the same run DIFFERENT, naming parameter and moment tensors; a folder that is no
# checkpoint and a corrupt checkpoint are unusable input (exit 2, one line naming it). The
# single-tensor perturbation is the [mpi][equiv] case of test_equiv.cpp.
#
# Usage: equiv_checkpoints.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
common=(--d-model 16 --steps 6 --ckpt-every 3 --global-batch 4 --micro-batch 1 --deterministic)
train 1 "$WORK/w1" "${common[@]}"
mpirun -np 2 --oversubscribe "$BIN_DIR/fsdp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 --peak-gflops 100 \
  --log-every 1000 --zero-stage 3 --run-dir "$WORK/w2" "${common[@]}" >"$WORK/w2.log" 2>&1 ||
  { cat "$WORK/w2.log" >&2; fail "the 2-rank ZeRO-3 run"; }

expect_verdict BITWISE "$WORK/w2/checkpoints" "$WORK/w1/checkpoints/step_00000006" --json "$WORK/same.json"
checks equiv-bitwise "$WORK/same.json" --step 6 --a-suffix w2/checkpoints/step_00000006 || fail "the BITWISE report"
pass "1-rank DDP and 2-rank ZeRO-3 checkpoints: every tensor, moments included, BITWISE"

rc=0
"$BIN_DIR/equiv-check" "$WORK/w2/checkpoints/step_00000003" "$WORK/w1/checkpoints" --json "$WORK/other.json" \
  >"$WORK/other.txt" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$WORK/other.txt" >&2; fail "step 3 against step 6: exit $rc, expected 1 (DIFFERENT)"; }
checks equiv-different "$WORK/other.json" || fail "the DIFFERENT report"
pass "another step of the run: DIFFERENT, naming parameters and moments"

# Unusable input: exit 2, one line naming the folder.
expect_exit2 "$WORK/w1' is neither a checkpoint" "$BIN_DIR/equiv-check" "$WORK/w1" "$WORK/w2/checkpoints"
cp -r "$WORK/w1/checkpoints/step_00000006" "$WORK/corrupt"
printf 'X' | dd of="$WORK/corrupt/rank_00000.h5" bs=1 seek=100 conv=notrunc status=none
expect_exit2 "rank_00000.h5" "$BIN_DIR/equiv-check" "$WORK/corrupt" "$WORK/w1/checkpoints"
pass "a folder that is no checkpoint, a corrupt checkpoint: exit 2 naming it"
