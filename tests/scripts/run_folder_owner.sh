#!/usr/bin/env bash
# One owner per run folder, end to end (train/run_folder_owner.hpp; docs/FORMATS.md, "The run
# folder's owner"): two ddp-train jobs (2 ranks each) started on one --run-dir: the second exits 2
# at once naming the first (its pid and host, from RUN_DIR/owner.lock) and writes nothing into the
# folder; the first, killed (SIGKILL, as a crash), leaves a stale lock that the resume takes over
# with a log line saying so; a finished run leaves no lock.
#
# Usage: run_folder_owner.sh BIN_DIR WORK_DIR
set -euo pipefail
BIN_DIR=$1 WORK=$2
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run="$WORK/run"
opts=(--data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 --peak-gflops 100 --log-every 1000
      --global-batch 4 --micro-batch 2 --deterministic --ckpt-every 20 --run-dir "$run")

first=""
cleanup() { [ -n "$first" ] && kill -KILL "$first" 2>/dev/null; return 0; }
trap cleanup EXIT
mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" "${opts[@]}" --steps 100000 >"$WORK/first.log" 2>&1 &
first=$!
for _ in $(seq 1 300); do [ -s "$run/steps.rank0.jsonl" ] && break; sleep 0.1; done
[ -s "$run/steps.rank0.jsonl" ] || { cat "$WORK/first.log" >&2; fail "the first job did not start training"; }
owner_pid=$(jq -r .pid "$run/owner.lock")
echo "  first job: rank 0 pid $owner_pid owns $run ($(cat "$run/owner.lock"))"
before=$(find "$run" -newer "$run/owner.lock" -name 'flight*' | wc -l)

start=$SECONDS
expect_exit 2 "in use by a job outside Slurm on host $(hostname), pid $owner_pid" \
  mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" "${opts[@]}" --steps 30
echo "  refused in $((SECONDS - start)) s"
((SECONDS - start < 30)) || fail "the refusal took $((SECONDS - start)) s: it should be at once"
[ "$(jq -r .pid "$run/owner.lock")" = "$owner_pid" ] || fail "the refused job changed the lock"
[ "$(find "$run" -newer "$run/owner.lock" -name 'flight*' | wc -l)" = "$before" ] || fail "the refused job wrote a flight record"
pids=$(jq -r .pid "$run/steps.rank0.jsonl" | sort -u | tr '\n' ' ')
echo "  the step log's rank-0 lines come from pid(s) $pids"
[ "$pids" = "$owner_pid " ] || fail "the step log should hold the first job's lines only"
pass "a second job on the folder: exit 2 naming the owner, the folder untouched"

for _ in $(seq 1 300); do [ -s "$run/checkpoints/latest" ] && break; sleep 0.1; done
# The whole job at once, as a crash of its node would: mpirun and its ranks (a KILLed mpirun alone
# leaves its ranks running, and they would rightly still own the folder).
# shellcheck disable=SC2046 # one word per pid
kill -KILL "$first" $(pgrep -P "$first" | tr '\n' ' ') 2>/dev/null || true
wait "$first" 2>/dev/null || true; first=""
for _ in $(seq 1 50); do kill -0 "$owner_pid" 2>/dev/null || break; sleep 0.1; done
[ -s "$run/owner.lock" ] || fail "the killed job should leave its lock behind"
mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" "${opts[@]}" --steps 30 --resume auto >"$WORK/resume.log" 2>&1 ||
  { cat "$WORK/resume.log" >&2; fail "the resume after the kill failed"; }
line=$(grep "took it over from a stale owner" "$WORK/resume.log" || true)
echo "  resume: ${line:-no take-over line}"
[[ "$line" == *"pid $owner_pid is gone on $(hostname)"* ]] || { cat "$WORK/resume.log" >&2; fail "the resume should say it took over from pid $owner_pid"; }
[ ! -e "$run/owner.lock" ] || fail "the finished run left its lock: $(cat "$run/owner.lock")"
pass "a killed owner's stale lock is taken over by the resume, which releases it at the end"
