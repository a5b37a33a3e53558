#!/usr/bin/env bash
# The hang-diagnose proof (issue 11): every injected fault x a world size x a few steps (the first
# step, a middle one, during a checkpoint save), through ddp-train and hang-diagnose:
#   - the job stops (every rank exits non-zero) within the collective timeout + 10 s of its launch;
#   - hang-diagnose --json exits 1 and names the injected rank as the culprit, with the right cause;
#   - the blocked collective it reports (group, seq, op, phase, step) is the one the dumps show,
#     computed here independently: for a skipped collective, the entry the culprit recorded as
#     skipped; otherwise the lowest sequence number a healthy rank started and did not complete;
#   - for a rank hung outside any collective, its reported phase and step are the injected ones;
#   - a wrong element count is reported as a numel mismatch at that sequence number.
# Faults (comm/fault_injection.hpp): skip-collective, hang (sleep forever in a phase), kill
# (SIGKILL: no dump; named as missing), wrong-count (one element fewer).
# Steps are 0-based; with --ckpt-every 2 the first save is after step 1, so "during a checkpoint" is
# step 1 in phase ckpt.
#
# Usage: hang_matrix.sh BIN_DIR WORK_DIR W   (W = 2 or 4; ctest runs one entry per W)
BIN_DIR=$1 WORK=$2 W=$3
. "$(dirname "$0")/common.sh"

timeout_s=3
culprit=$((W - 1))  # the last rank at W=2; rank 3 at W=4 (not rank 0, which commits checkpoints)

# run_case NAME SPEC CAUSE [EXPECT_PHASE]: one faulty job, then the checks.
run_case() {
  local name=$1 spec=$2 cause=$3
  local dir="$WORK/$name"
  mkdir -p "$dir"
  local start rc=0
  start=$(date +%s%N)
  mpirun -np "$W" --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 \
    --d-model 32 --peak-gflops 100 --log-every 1000 --steps 6 --global-batch 8 --micro-batch 2 --ckpt-every 2 \
    --collective-timeout $timeout_s --inject "$spec" --run-dir "$dir" >"$dir.log" 2>&1 || rc=$?
  local elapsed
  elapsed=$(seconds_since "$start")
  [ "$rc" -ne 0 ] || { cat "$dir.log" >&2; fail "$name: the faulty job exited 0"; }
  within_s "$elapsed" $((timeout_s + 10)) ||
    fail "$name: the job took ${elapsed}s to stop, more than the timeout + 10 s"
  local out drc=0
  out=$("$BIN_DIR/hang-diagnose" --json "$dir" 2>"$dir.diagnose.err") || drc=$?
  [ "$drc" -eq 1 ] || { cat "$dir.log" "$dir.diagnose.err" >&2; echo "$out" >&2; fail "$name: hang-diagnose exited $drc, expected 1"; }
  echo "$out" >"$dir.diagnosis.json"
  checks hang-case "$dir" "$dir.diagnosis.json" "$spec" "$cause" "$culprit" "$W" ||
    { cat "$dir.log" >&2; "$BIN_DIR/hang-diagnose" "$dir" >&2 || true; fail "$name: wrong diagnosis"; }
  pass "W=$W $name: stopped in ${elapsed}s, hang-diagnose: $([ "$cause" = ambiguous ] && echo "ambiguous, every rank a candidate" || echo "names rank $culprit ($cause)")"
}

# first step (0), a middle step (3), during the checkpoint save after step 1.
run_case skip_first "skip-collective:rank=$culprit,step=0" skipped
run_case skip_middle "skip-collective:rank=$culprit,step=3" skipped
run_case skip_ckpt "skip-collective:rank=$culprit,step=1,phase=ckpt" skipped
run_case hang_first "hang:rank=$culprit,step=0" outside-collective
run_case hang_middle "hang:rank=$culprit,step=3,phase=backward" outside-collective
run_case hang_ckpt "hang:rank=$culprit,step=1,phase=ckpt" outside-collective
run_case kill_first "kill:rank=$culprit,step=0" no-dump
run_case kill_middle "kill:rank=$culprit,step=3,phase=optimizer" no-dump
run_case kill_ckpt "kill:rank=$culprit,step=1,phase=ckpt" no-dump
# At W=2 a mismatch at the first collective of its kind has no majority and no history to decide
# by: ambiguous, both ranks named.
run_case count_first "wrong-count:rank=$culprit,step=0,phase=backward" "$([ "$W" -eq 2 ] && echo ambiguous || echo mismatch)"
run_case count_middle "wrong-count:rank=$culprit,step=3,phase=backward" mismatch
# The checkpoint group is new at the first save: no history either.
run_case count_ckpt "wrong-count:rank=$culprit,step=1,phase=ckpt" "$([ "$W" -eq 2 ] && echo ambiguous || echo mismatch)"

# Dumps of two different jobs are refused (exit 2, the file named).
mixed="$WORK/mixed"
mkdir -p "$mixed"
cp "$WORK/skip_first/flight.rank0.json" "$mixed/"
cp "$WORK/skip_middle/flight.rank$culprit.json" "$mixed/"
rc=0
err=$("$BIN_DIR/hang-diagnose" "$mixed" 2>&1 >/dev/null) || rc=$?
echo "  mixed jobs: exit $rc: $err"
[ "$rc" -eq 2 ] || fail "dumps of two jobs: exit $rc, expected 2"
[[ "$err" == *flight.rank* ]] || fail "the error does not name the file"
pass "W=$W dumps of two different jobs are refused with exit 2"
