#!/usr/bin/env bash
# The kill-and-resume proof with planned kills one step apart (issue 27): a kill during the write
# of step_6 followed by a step kill at step 6, and a kill during the write of step_10 followed by
# a node loss at step 10 (W 3 -> 2). Each must hit its own attempt (the killer waits for the next
# attempt's first step), so 4 kills give 4 restarts; the proof must hold with the BITWISE verdict
# and a consistent count check. Before the fix the second kill of each pair could land in the
# attempt the first had already ended: one restart for two kills, and a false "FAIL".
#
# Usage: kill_resume_adjacent.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"  # strict mode, the Open MPI environment, fail/pass (its dataset is unused)
here="$(cd "$(dirname "$0")/../.." && pwd)"

cat >"$WORK/plan" <<'PLAN'
# rank step mode capacity
1 5 during-save -   # the write of step_00000006 (saves every 2 steps)
2 6 step -          # one step later: the resumed attempt, from step_00000004
0 9 during-save -   # the write of step_00000010
2 10 step 2         # node lost right after the save kill: W 3 -> 2
PLAN
rc=0
"$here/scripts/kill-resume-proof.sh" --bin "$BIN_DIR" --work "$WORK/proof" --np 3 --global-batch 6 --steps 12 \
  --d-model 32 --ckpt-every 2 --plan "$WORK/plan" >"$WORK/proof.log" 2>&1 || rc=$?
cat "$WORK/proof.log"
[ "$rc" -eq 0 ] || fail "the proof exited $rc"
grep -q '^kill-resume-proof: invariant: HOLDS' "$WORK/proof.log" || fail "no 'invariant: HOLDS' line"
grep -qE '^  final step_00000012 \(parameters and optimizer moments, [0-9]+ tensors\) BITWISE' "$WORK/proof.log" ||
  fail "no BITWISE line for the final checkpoint"
grep -qE '^kill-resume-proof: count check .*: 4 of 4 planned kills fired, in 4 distinct attempts; 4 restarts: consistent$' \
  "$WORK/proof.log" || fail "the count check is not '4 kills in 4 attempts, 4 restarts: consistent'"
checks adjacent-kills "$WORK/proof" || fail "the kills or restarts are not the planned ones"
pass "kills one step apart: 4 kills in 4 attempts, 4 restarts, mid-write kills resumed from the previous checkpoint, W 3 -> 2 logged, final state BITWISE"
