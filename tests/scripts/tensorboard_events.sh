#!/usr/bin/env bash
# TensorBoard event files (issue 49) across a kill and a restart, read by the tensorboard package's
# own reader:
#   (1) a 2-rank ddp-train run (checkpoints every 2 steps, a hold-out evaluation every 3) whose
#       rank 1 SIGKILLs itself entering step 5 (--inject kill): both ranks have logged step 4, past
#       their last checkpoint (step_00000004, i.e. the first step to run is 4);
#   (2) the run resumed (--resume auto) to step 8: each rank drops its killed attempt's step 4
#       before logging it again (the restart rule), and says so;
#   (3) tests/clients/check-tensorboard-events.py under tensorboard 2.20.0 (scripts/python-env.sh
#       tensorboard): every rank's scalars equal its step log's, per tag strictly increasing steps,
#       none missing, none duplicated (docstring there);
#   (4) RUN_DIR/tensorboard not a writable folder (a plain file: as root, permission bits would
#       not stop a write): exit 2 before any training, one error line per rank naming its folder,
#       the step logs and checkpoints untouched; then --no-tensorboard resumes the same job;
#   (5) the disk under the event files fills mid-run (a 64 KiB tmpfs on RUN_DIR/tensorboard, in a
#       private mount namespace of the test's own: gone with its processes, even when the test is
#       killed): exit 0, one warning per rank naming its event file and the full disk, every step in
#       the step logs, and the events written before it a clean prefix by the tensorboard reader.
#       Said skipped (the rest still runs) where a tmpfs cannot be mounted (not root).
# Skipped (77) when the tensorboard environment cannot be had (python-env.sh says why).
#
# Usage: tensorboard_events.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY=$("$ROOT/scripts/python-env.sh" tensorboard) ||
  { echo "SKIPPED: the tensorboard package is unavailable (scripts/python-env.sh said why above)"; exit 77; }
RUN="$WORK/run"
C=(--d-model 32 --global-batch 8 --micro-batch 2 --deterministic --cutoff 2024-01-10T00:00:00Z --eval-every 3
   --eval-samples 8 --ckpt-every 2)
last_step() { tail -n 1 "$1" | jq -er .step; }

echo "(1) rank 1 SIGKILLed entering step 5"
rc=0; train 2 "$RUN" "${C[@]}" --steps 8 --inject kill:rank=1,step=5 2>/dev/null || rc=$?
[ "$rc" -ne 0 ] || fail "the run with a killed rank exited 0"
[ "$(cat "$RUN/checkpoints/latest")" = step_00000004 ] || fail "the newest checkpoint is not step_00000004"
for r in 0 1; do [ "$(last_step "$RUN/steps.rank$r.jsonl")" = 4 ] || fail "rank $r's last logged step is not 4"; done
echo "  exit $rc; newest checkpoint step_00000004; both ranks logged step 4 (past it)"

echo "(2) resumed to step 8"
train 2 "$RUN" "${C[@]}" --steps 8 --resume auto
grep "tensorboard:" "$RUN.log" | sed 's/^/  /'

echo "(3) the tensorboard package's reader against the step logs"
"$PY" "$ROOT/tests/clients/check-tensorboard-events.py" "$RUN" 2 8 || fail "the event files do not match the step logs"
[ "$(grep -c 'tensorboard: dropped 1 records of steps >= 4 left by an earlier attempt' "$RUN.log")" -eq 2 ] ||
  fail "the resume did not say on each rank that it dropped the killed attempt's step 4"
for r in 0 1; do
  [ "$(find "$RUN/tensorboard/rank_$r" -name '*tfevents*' | wc -l)" -eq 2 ] || fail "rank $r: not one event file per attempt"
done
pass "kill and resume: every rank's scalars equal its step log's, steps strictly increasing, none missing or repeated"

echo "(4) RUN_DIR/tensorboard not a writable folder"
mv "$RUN/tensorboard" "$WORK/tensorboard.aside"
echo "not a folder" >"$RUN/tensorboard"
before=$(cat "$RUN"/steps.rank*.jsonl | md5sum; ls "$RUN/checkpoints"; cat "$RUN/checkpoints/latest")
rc=0
mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 --peak-gflops 100 \
  --log-every 1000 --run-dir "$RUN" "${C[@]}" --steps 10 --resume auto >"$WORK/unwritable.log" 2>&1 || rc=$?
grep 'error:' "$WORK/unwritable.log" | sed 's/^/  /'
[ "$rc" -eq 2 ] || { cat "$WORK/unwritable.log" >&2; fail "exit $rc, expected 2"; }
for r in 0 1; do
  [ "$(grep -c "^\[rank $r/2\] error:" "$WORK/unwritable.log")" -eq 1 ] || fail "rank $r did not print exactly one error line"
  grep -q "^\[rank $r/2\] error: $RUN/tensorboard/rank_$r: cannot write TensorBoard event files here: .*--no-tensorboard" \
    "$WORK/unwritable.log" || fail "rank $r's error line does not name $RUN/tensorboard/rank_$r and the way out"
done
! grep -q "resumed from\|^\[rank 0/2\] step " "$WORK/unwritable.log" || fail "the job resumed or trained before refusing"
after=$(cat "$RUN"/steps.rank*.jsonl | md5sum; ls "$RUN/checkpoints"; cat "$RUN/checkpoints/latest")
[ "$before" = "$after" ] || fail "the refused start changed the step logs or the checkpoints"
pass "an unwritable RUN_DIR/tensorboard: exit 2 before the resume, one line per rank naming its folder, job untouched"
rm "$RUN/tensorboard"
train 2 "$RUN" "${C[@]}" --steps 10 --resume auto --no-tensorboard
[ "$(last_step "$RUN/steps.rank0.jsonl")" = 9 ] && [ ! -e "$RUN/tensorboard" ] ||
  fail "--no-tensorboard did not resume to step 10 without event files"
pass "--no-tensorboard: the same job resumed to step 10, no event files written"

echo "(5) the disk under the event files fills mid-run"
FULL="$WORK/full"
mkdir -p "$FULL/tensorboard"
# In the namespace: mount, train 300 steps on 2 ranks, read the events back (the mount ends with it).
full_disk_run() {
  mount -t tmpfs -o size=64k tmpfs "$FULL/tensorboard" || return 77
  mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 \
    --peak-gflops 100 --log-every 1000 --global-batch 8 --micro-batch 2 --cutoff 2024-01-10T00:00:00Z \
    --eval-every 25 --eval-samples 8 --steps 300 --run-dir "$FULL" >"$FULL.log" 2>&1 || return $?
  "$PY" "$ROOT/tests/clients/check-tensorboard-events.py" "$FULL" 2 300 --stopped-early >"$FULL.check" 2>&1 || return 10
}
export -f full_disk_run
export FULL BIN_DIR DATA PY ROOT
rc=0; unshare --mount --propagation private bash -c full_disk_run 2>"$WORK/unshare.err" || rc=$?
if [ "$rc" -eq 77 ] || grep -q "unshare failed" "$WORK/unshare.err"; then
  echo "  (5) SKIPPED: cannot mount a tmpfs in a private mount namespace here ($(head -1 "$WORK/unshare.err")); run as root"
else
  sed 's/^/  /' "$FULL.check" 2>/dev/null | grep -v "^  ok:" || true
  [ "$rc" -ne 10 ] || fail "the events written before the disk filled are not a clean prefix of the step logs"
  [ "$rc" -eq 0 ] || { cat "$FULL.log" "$WORK/unshare.err" >&2; fail "the run with a full event disk exited $rc, expected 0"; }
  for r in 0 1; do
    [ "$(grep -c "^\[rank $r/2\] warning: .*writes no more TensorBoard events" "$FULL.log")" -eq 1 ] ||
      fail "rank $r did not warn exactly once"
    grep -q "^\[rank $r/2\] warning: $FULL/tensorboard/rank_$r/events.out.tfevents[^ ]*: .*No space left on device" "$FULL.log" ||
      fail "rank $r's warning does not name its event file and the full disk"
  done
  grep "warning:" "$FULL.log" | head -1 | cut -c1-200 | sed 's/^/  /'
  pass "a full event disk mid-run: one warning per rank naming its file, the run went on to step 300, the events a clean prefix"
fi
