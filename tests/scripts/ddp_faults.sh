#!/usr/bin/env bash
# Contract 6 end to end through ddp-train: (1) with skip-collective injected, every rank exits
# non-zero within timeout + 10 s and the flight records show the skipping rank one sequence number
# behind the others; (2) with a delay injected, the summary names that rank as the slowest;
# (3) an injection without --inject is impossible (the option is the only way in), and a bad
# spec is refused with exit 2; (4) a rank that skips a checkpoint-commit collective
# (phase=ckpt) makes every rank exit within the timeout, and the dumps name the "ckpt" group's
# sequence number, the step and the phase; (5) SIGUSR2 to mpirun makes every rank write its flight
# record (reason signal, its phase and step) while the job goes on to exit 0, and hang-diagnose
# finds no hang in those snapshots; (6) a rank leaving on an error (a non-finite loss) writes its
# record (reason exit, the message), and hang-diagnose names the error.
#
# Usage: ddp_faults.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"

# (1) Hang: rank 1 skips its first collective of step 2; 2 s timeout.
timeout_s=2
start=$(date +%s%N)
rc=0
train 2 "$WORK/hang" --d-model 32 --steps 6 --global-batch 4 --micro-batch 2 --collective-timeout $timeout_s \
  --inject skip-collective:rank=1,step=2 2>/dev/null || rc=$?
elapsed=$(seconds_since "$start")
echo "  hang run: exit $rc after ${elapsed}s"
[ "$rc" -ne 0 ] || fail "the hung job exited 0"
within_s "$elapsed" $((timeout_s + 10)) || fail "took ${elapsed}s > timeout + 10 s"
grep -q "collective timeout: AllReduce(seq=" "$WORK/hang.log" || { cat "$WORK/hang.log" >&2; fail "no timeout line naming the collective"; }
grep -m1 "collective timeout" "$WORK/hang.log"
for r in 0 1; do [ -s "$WORK/hang/flight.rank$r.json" ] || fail "rank $r wrote no flight record"; done
checks seq-behind "$WORK/hang" dp 1 0 || fail "flight records do not show rank 1 one sequence number behind"
pass "skip-collective: all ranks exit non-zero within timeout + 10 s, rank 1 one behind"

# (2) Straggler: rank 1 sleeps 150 ms per step.
train 2 "$WORK/straggler" --d-model 32 --steps 8 --global-batch 4 --micro-batch 2 --inject delay:rank=1,ms=150
slowest=$(jq -r .slowest_rank "$WORK/straggler/summary.json")
echo "  straggler run: summary slowest_rank = $slowest"
[ "$slowest" = 1 ] || fail "the delayed rank 1 is not named slowest"
pass "delay: the summary names rank 1 as the slowest"

# (3) A malformed injection spec is refused with exit 2.
rc=0
train 2 "$WORK/badspec" --d-model 32 --steps 2 --global-batch 4 --micro-batch 2 --inject skip-collective:rank=x 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "a malformed --inject exited $rc, expected 2"
pass "malformed --inject refused with exit 2"

# (4) Hang in a checkpoint commit: rank 1 skips its first checkpoint collective of step 1 (the save
# after step 2 completes); 2 s timeout. The save runs on the "ckpt" group (its own sequence numbers).
start=$(date +%s%N)
rc=0
train 2 "$WORK/ckpt_hang" --d-model 32 --steps 6 --global-batch 4 --micro-batch 2 --ckpt-every 2 \
  --collective-timeout $timeout_s --inject skip-collective:rank=1,step=1,phase=ckpt 2>/dev/null || rc=$?
elapsed=$(seconds_since "$start")
echo "  checkpoint hang run: exit $rc after ${elapsed}s"
[ "$rc" -ne 0 ] || fail "the job hung in a checkpoint commit exited 0"
within_s "$elapsed" $((timeout_s + 10)) || fail "took ${elapsed}s > timeout + 10 s"
grep -m1 "collective timeout: .*group=ckpt" "$WORK/ckpt_hang.log" ||
  { cat "$WORK/ckpt_hang.log" >&2; fail "no timeout line naming the ckpt group"; }
for r in 0 1; do [ -s "$WORK/ckpt_hang/flight.rank$r.json" ] || fail "rank $r wrote no flight record"; done
checks ckpt-skip "$WORK/ckpt_hang" 1 1 ||
  fail "the dumps do not name the ckpt group's sequence number, step and phase"
pass "skip-collective in a checkpoint commit: all ranks exit within timeout + 10 s, the dumps name the ckpt group's seq"

# (5) Dumps on demand: SIGUSR2 to mpirun (forwarded to every rank) while the job runs.
dir="$WORK/usr2"
mkdir -p "$dir"
mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 \
  --peak-gflops 100 --log-every 1000 --steps 40 --global-batch 4 --micro-batch 2 --inject delay:rank=0,ms=100 \
  --run-dir "$dir" >"$dir.log" 2>&1 &
launcher=$!
for _ in $(seq 100); do  # until both ranks are in the step loop (a step record each)
  [ -s "$dir/steps.rank0.jsonl" ] && [ -s "$dir/steps.rank1.jsonl" ] && break
  sleep 0.1
done
kill -USR2 $launcher
rc=0
wait $launcher || rc=$?
[ "$rc" -eq 0 ] || { cat "$dir.log" >&2; fail "the job exited $rc after SIGUSR2, expected 0"; }
checks signal-records "$dir" 2 SIGUSR2 || { cat "$dir.log" >&2; fail "SIGUSR2 did not leave both ranks' records"; }
rc=0
out=$("$BIN_DIR/hang-diagnose" "$dir") || rc=$?
[ "$rc" -eq 0 ] || { echo "$out" >&2; fail "hang-diagnose on SIGUSR2 snapshots of a healthy job exited $rc, expected 0"; }
echo "$out" | grep "^verdict"
pass "SIGUSR2: every rank wrote its record, the job went on to exit 0, hang-diagnose finds no hang"

# (6) An error exit writes the record: a learning rate that makes the loss non-finite at step 1.
dir="$WORK/nan"
mkdir -p "$dir"
rc=0
train 2 "$dir" --d-model 32 --steps 4 --global-batch 4 --micro-batch 2 --lr 1e30 --warmup 0 2>/dev/null || rc=$?
[ "$rc" -ne 0 ] || fail "the non-finite run exited 0"
rc=0
"$BIN_DIR/hang-diagnose" --json "$dir" >"$dir.diagnosis.json" || rc=$?
[ "$rc" -eq 1 ] || { cat "$dir.diagnosis.json" >&2; fail "hang-diagnose exited $rc on error-exit records, expected 1"; }
checks error-exit "$dir.diagnosis.json" 2 "non-finite loss" || fail "the error-exit records do not name the error"
pass "an error exit writes every rank's record (reason exit) and hang-diagnose names the error"
