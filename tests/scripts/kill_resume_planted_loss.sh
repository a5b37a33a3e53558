#!/usr/bin/env bash
# The kill-and-resume proof must still fail on a real loss (issue 27): with the test-only fault
# SHARDTRAIN_TEST_FAULT=skip-sampler-restore (read in libcore/src/train/resume.cpp) every resume
# restarts the sampler at the start of epoch 0, so the resumed run trains on other samples than
# the uninterrupted one. The proof must exit 1 naming lost progress (the final checkpoint not
# BITWISE), not a harness inconsistency, while its count check stays consistent.
#
# Usage: kill_resume_planted_loss.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"  # strict mode, the Open MPI environment, fail/pass (its dataset is unused)
here="$(cd "$(dirname "$0")/../.." && pwd)"

printf '1 3 step -\n' >"$WORK/plan"  # one kill after step 3: the resume is from step_00000002
rc=0
SHARDTRAIN_TEST_FAULT=skip-sampler-restore "$here/scripts/kill-resume-proof.sh" --bin "$BIN_DIR" --work "$WORK/proof" \
  --np 2 --global-batch 8 --steps 6 --d-model 32 --ckpt-every 2 --plan "$WORK/plan" >"$WORK/proof.log" 2>&1 || rc=$?
cat "$WORK/proof.log"
[ "$rc" -eq 1 ] || fail "the proof exited $rc with the planted loss, expected 1"
grep -q 'TEST FAULT SHARDTRAIN_TEST_FAULT=skip-sampler-restore' "$WORK/proof/run/attempt1.log" ||
  fail "the resumed attempt did not report the planted fault (was it active?)"
grep -q '^kill-resume-proof: invariant: VIOLATED -- progress lost' "$WORK/proof.log" || fail "no 'invariant: VIOLATED' line"
grep -q '^FAIL (progress lost): final step_00000006 is not BITWISE' "$WORK/proof.log" ||
  fail "the failure does not name the final checkpoint as not BITWISE"
grep -q 'harness inconsistency' "$WORK/proof.log" && fail "the planted loss was called a harness inconsistency"
grep -qE '^kill-resume-proof: count check .*: 1 of 1 planned kills fired, in 1 distinct attempts; 1 restarts: consistent$' \
  "$WORK/proof.log" || fail "the count check is not consistent"
pass "a resume that skips the sampler state: the proof exits 1, progress lost (not BITWISE), count check consistent"
