#!/usr/bin/env bash
# scripts/run-resilient.sh --min-ranks (issue 14) with a stand-in for the training command (no
# MPI): a bash script that reads its rank count from -np, fails naming a rank while its plan says
# so, and succeeds otherwise. Checks the world-size decisions and the restart log:
#  (1) the same rank failing twice in a row drops its slot: 4 -> 3 ranks (12 micro-batches: 3
#      divides), with old and new W and the reason in restarts.json; without flight records the
#      launcher's verdict comes from the command's "[rank R/W] error" line (error-exit, rank 1);
#  (2) a capacity of 5 with 12 micro-batches restarts on 4 (5 does not divide 12), and when the
#      capacity comes back the next restart grows back to the first launch's 6;
#  (3) no world size >= --min-ranks fits: the launcher gives up with the last failure's status;
#  (4) usage errors exit 2 with a message: --min-ranks without a rank count or a global batch;
#  (5) the backoff doubles with each failure in a row that committed no checkpoint and starts over
#      after an attempt that did (a job failing once a day is not treated as a crash loop);
#  (6) a command that exits 2 (usage or input error) runs once: exit 2, its message last;
#  (7) SIGUSR1 to the launcher is survived and stops restarts.
#
# Usage: resilient_elastic.sh BIN_DIR WORK_DIR   (BIN_DIR unused: the launcher alone is tested)
# shellcheck disable=SC2015  # `[ rc ] && grep || { ...; fail; }`: fails unless both hold, as meant
set -euo pipefail
WORK=$2
here="$(cd "$(dirname "$0")/../.." && pwd)"
launcher="$here/scripts/run-resilient.sh"
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# The stand-in: fake.sh PLAN -np N --global-batch G --run-dir R [...]. PLAN holds one line per
# attempt: "fail RANK", "ckptfail RANK" (commits a checkpoint, i.e. moves R/checkpoints/latest,
# then fails) or "ok"; the attempt number is the count of lines in R/attempts. Every
# attempt appends "N" (its rank count) there and writes one step record, so restart times exist.
cat >"$WORK/fake.sh" <<'SH'
#!/usr/bin/env bash
plan=$1; shift
np="" run=""
while (($#)); do case "$1" in -np) np=$2; shift 2 ;; --run-dir) run=$2; shift 2 ;; *) shift ;; esac; done
mkdir -p "$run"
n=$(cat "$run/attempts" 2>/dev/null | wc -l)
echo "$np" >>"$run/attempts"
jq -cn --argjson step "$n" '{step: $step, time: now}' >>"$run/steps.rank0.jsonl"
read -r what rank < <(sed -n "$((n + 1))p" "$plan")
if [ "$what" = ckptfail ]; then mkdir -p "$run/checkpoints" && echo "step_$n" >"$run/checkpoints/latest"; what=fail; fi
[ "$what" = fail ] && { echo "[rank $rank/$np] error: injected"; exit 1; }
exit 0
SH
chmod +x "$WORK/fake.sh"
worlds() { tr '\n' ' ' <"$1/attempts" | sed 's/ $//'; }

printf 'fail 1\nfail 1\nok\n' >"$WORK/plan1"
"$launcher" --max-restarts 4 --backoff 0 --min-ranks 2 -- "$WORK/fake.sh" "$WORK/plan1" -np 4 --global-batch 12 \
  --micro-batch 1 --run-dir "$WORK/r1" >"$WORK/r1.log" 2>&1 || { cat "$WORK/r1.log"; fail "(1) did not succeed"; }
[ "$(worlds "$WORK/r1")" = "4 4 3" ] || fail "(1) world sizes $(worlds "$WORK/r1"), expected 4 4 3"
python3 - "$WORK/r1/restarts.json" <<'PY' || fail "(1) restart log"
import json, sys
r = json.load(open(sys.argv[1]))["restarts"]
assert [(x["previous_world_size"], x["world_size"]) for x in r] == [(4, 4), (4, 3)], r
assert r[1]["world_size_reason"] == "rank 1 failed 2 times in a row", r[1]
assert r[0]["world_size_reason"] is None and r[1]["failed_rank"] == 1, r
# No flight records (a stand-in command): the verdict comes from the command's "[rank R/W] error" line.
assert [x["verdict"]["class"] for x in r] == ["error-exit", "error-exit"] and r[1]["verdict"]["culprit_rank"] == 1, r
PY
pass "(1) a rank failing twice in a row: 4 -> 3 ranks, logged with the reason"

echo 5 >"$WORK/capacity"
printf 'fail 0\nfail 2\nok\n' >"$WORK/plan2"
"$launcher" --max-restarts 4 --backoff 0 --min-ranks 2 --capacity-cmd "cat $WORK/capacity; [ -s $WORK/r2/attempts ] && [ \$(wc -l <$WORK/r2/attempts) -ge 2 ] && echo 6" \
  -- "$WORK/fake.sh" "$WORK/plan2" -np 6 --global-batch 12 --run-dir "$WORK/r2" >"$WORK/r2.log" 2>&1 ||
  { cat "$WORK/r2.log"; fail "(2) did not succeed"; }
[ "$(worlds "$WORK/r2")" = "6 4 6" ] || fail "(2) world sizes $(worlds "$WORK/r2"), expected 6 4 6"
python3 - "$WORK/r2/restarts.json" <<'PY' || fail "(2) restart log"
import json, sys
r = json.load(open(sys.argv[1]))["restarts"]
assert [(x["previous_world_size"], x["world_size"]) for x in r] == [(6, 4), (4, 6)], r
assert r[0]["world_size_reason"] == "capacity 5 ranks (--capacity-cmd)", r[0]
assert r[1]["world_size_reason"] == "capacity back to 6 ranks", r[1]
PY
pass "(2) capacity 5 of 6 with 12 micro-batches: restart on 4; capacity back: 6 again"

printf 'fail 0\nok\n' >"$WORK/plan3"
echo 3 >"$WORK/capacity3"
rc=0
"$launcher" --max-restarts 4 --backoff 0 --min-ranks 4 --capacity-cmd "cat $WORK/capacity3" -- "$WORK/fake.sh" \
  "$WORK/plan3" -np 4 --global-batch 12 --run-dir "$WORK/r3" >"$WORK/r3.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "(3) exit $rc, expected the failure's 1"
grep -q "no world size between --min-ranks 4 and 3 divides the global batch's 12 micro-batches" "$WORK/r3.log" ||
  { cat "$WORK/r3.log"; fail "(3) no reason given"; }
[ "$(worlds "$WORK/r3")" = "4" ] || fail "(3) relaunched although nothing fits"
pass "(3) nothing >= --min-ranks fits: gives up with the failure's status and the reason"

rc=0
"$launcher" --min-ranks 2 -- "$WORK/fake.sh" "$WORK/plan1" --global-batch 12 --run-dir "$WORK/r4" >"$WORK/r4.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "needs the rank count in the command" "$WORK/r4.log" || { cat "$WORK/r4.log"; fail "(4) no rank count: exit $rc"; }
rc=0
"$launcher" --min-ranks 2 -- "$WORK/fake.sh" "$WORK/plan1" -np 4 --run-dir "$WORK/r5" >"$WORK/r5.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "needs --global-batch" "$WORK/r5.log" || { cat "$WORK/r5.log"; fail "(4) no global batch: exit $rc"; }
rc=0
"$launcher" --capacity-cmd true -- "$WORK/fake.sh" "$WORK/plan1" -np 4 --run-dir "$WORK/r6" >"$WORK/r6.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "needs --min-ranks" "$WORK/r6.log" || { cat "$WORK/r6.log"; fail "(4) --capacity-cmd alone: exit $rc"; }
pass "(4) usage errors exit 2 naming what is missing"

printf 'fail 0\nfail 0\nckptfail 0\nfail 0\nok\n' >"$WORK/plan7"
"$launcher" --max-restarts 5 --backoff 0.01 -- "$WORK/fake.sh" "$WORK/plan7" -np 2 --run-dir "$WORK/r7" >"$WORK/r7.log" 2>&1 ||
  { cat "$WORK/r7.log"; fail "(5) did not succeed"; }
waits=$(grep -oE "restarting from .* in [0-9.]+s" "$WORK/r7.log" | grep -oE "[0-9.]+s$" | tr '\n' ' ' | sed 's/ $//')
[ "$waits" = "0.01s 0.02s 0.01s 0.02s" ] || { cat "$WORK/r7.log"; fail "(5) backoff waits '$waits', expected 0.01s 0.02s 0.01s 0.02s"; }
pass "(5) backoff 0.01, 0.02 in a crash loop; after an attempt that committed a checkpoint: 0.01, 0.02 again"

cat >"$WORK/usage.sh" <<'SH'
#!/usr/bin/env bash
echo started >>"$WORK_ATTEMPTS"
echo "[rank 0/2] error: --steps: not a number; pass a whole number of steps" >&2
exit 2
SH
chmod +x "$WORK/usage.sh"
rc=0
WORK_ATTEMPTS="$WORK/r8.attempts" "$launcher" --max-restarts 3 --backoff 0 -- "$WORK/usage.sh" -np 2 --run-dir "$WORK/r8" \
  >"$WORK/r8.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/r8.log"; fail "(6) a usage error: exit $rc, expected 2"; }
[ "$(wc -l <"$WORK/r8.attempts")" = 1 ] || { cat "$WORK/r8.log"; fail "(6) a usage error was retried"; }
[ "$(tail -1 "$WORK/r8.log")" = "[rank 0/2] error: --steps: not a number; pass a whole number of steps" ] ||
  { cat "$WORK/r8.log"; fail "(6) the command's own message is not the last line"; }
pass "(6) exit 2 (usage or input error): one attempt, exit 2, the command's message last"

# (7) SIGUSR1 to the launcher (Slurm's time-limit warning to the whole job): the launcher lives on,
# the attempt runs to its end, and a failing attempt is not restarted.
cat >"$WORK/slow.sh" <<'SH'
#!/usr/bin/env bash
echo started >>"$WORK_ATTEMPTS"
sleep 1
exit 4
SH
chmod +x "$WORK/slow.sh"
rc=0
WORK_ATTEMPTS="$WORK/r9.attempts" "$launcher" --max-restarts 3 --backoff 0 -- "$WORK/slow.sh" --run-dir "$WORK/r9" \
  >"$WORK/r9.log" 2>&1 & pid=$!
sleep 0.4; kill -USR1 "$pid"
wait "$pid" || rc=$?
[ "$rc" = 4 ] || { cat "$WORK/r9.log"; fail "(7) after SIGUSR1: exit $rc, expected the attempt's 4"; }
[ "$(wc -l <"$WORK/r9.attempts")" = 1 ] || { cat "$WORK/r9.log"; fail "(7) restarted after SIGUSR1"; }
grep -q "after SIGUSR1 (the job is being stopped): not restarted" "$WORK/r9.log" || { cat "$WORK/r9.log"; fail "(7) no message"; }
pass "(7) SIGUSR1: the launcher outlives it, the attempt ends on its own, no restart"
