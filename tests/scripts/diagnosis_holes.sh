#!/usr/bin/env bash
# The three holes of issue 24 in the diagnosis of a failed job, each end to end through ddp-train
# and hang-diagnose --json:
#  (a) a job whose ranks exit on an error (a non-finite loss: --lr 1e30) writes exit records that
#      keep every group's entries (the record is written while the communicators still exist; it
#      used to hold "groups": []), and the verdict is an error of the whole job (no rank to blame);
#  (b) fast mode at W=3 (the MPI library's all-reduce, which does not check sizes): rank 1 one
#      element short in the gradient all-reduce. Every rank writes a record (none is ended by Open
#      MPI, which exited 15 without one), the job exits 4, and the verdict is a mismatch naming rank 1;
#  (c) deterministic mode at W=3, the same fault in the gradient reduction: ranks 0 and 2 say
#      "untrusted input from world rank(s) 1" in their records, no rank reports the exact-sum bound
#      on garbage, and the verdict names rank 1 (it once named rank 2, a victim).
# Usage: diagnosis_holes.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"

# run_job NAME NP [ddp-train options...]: a faulty job; prints its exit status.
run_job() {
  local name=$1 np=$2; shift 2
  local rc=0
  mpirun -np "$np" --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 \
    --d-model 32 --peak-gflops 100 --log-every 1000 --steps 4 --global-batch 12 --micro-batch 2 \
    --collective-timeout 5 --run-dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1 || rc=$?
  echo "$rc"
}

# check NAME PYTHON: the diagnosis of run NAME (d) and its records (recs, by rank) against PYTHON.
check() {
  local name=$1 code=$2 drc=0
  "$BIN_DIR/hang-diagnose" --json "$WORK/$name" >"$WORK/$name.diagnosis.json" 2>"$WORK/$name.diagnose.err" || drc=$?
  [ "$drc" -eq 1 ] || { cat "$WORK/$name.log" "$WORK/$name.diagnose.err" >&2; fail "$name: hang-diagnose exited $drc"; }
  python3 - "$WORK/$name" "$WORK/$name.diagnosis.json" <<PY || { cat "$WORK/$name.log" >&2; "$BIN_DIR/hang-diagnose" "$WORK/$name" >&2 || true; fail "$name: wrong record or diagnosis"; }
import glob, json, sys
recs = {}
for f in glob.glob(sys.argv[1] + "/flight.rank*.json"):
    r = json.load(open(f)); recs[r["rank"]] = r
d = json.load(open(sys.argv[2]))
s = d["summary"]
print("  verdict:", d["verdict"], "summary:", s)
$code
PY
}

rc=$(run_job nan 2 --lr 1e30)
[ "$rc" -ne 0 ] || fail "(a) the job with --lr 1e30 exited 0"
check nan '
assert sorted(recs) == [0, 1], sorted(recs)
for r, rec in recs.items():
    assert rec["reason"] == "exit", (r, rec["reason"])
    assert "non-finite" in rec["trigger"]["error"], rec["trigger"]
    dp = [g for g in rec["groups"] if g["name"] == "dp"]
    assert dp and dp[0]["entries"] and dp[0]["live"], (r, [g["name"] for g in rec["groups"]])
assert d["verdict"] == "error-exit" and s["class"] == "error-exit", d["verdict"]
assert d["culprit"]["job_wide"] is True and s["job_wide"] is True, (d["culprit"], s)
assert d["culprit"]["same_error_ranks"] == [0, 1] and "non-finite" in d["culprit"]["error"], d["culprit"]
'
pass "(a) exit on a NaN loss: every rank's exit record keeps its groups' entries; an error of the whole job"

rc=$(run_job fast3 3 --allreduce mpi --inject wrong-count:rank=1,step=2,phase=backward)
[ "$rc" -eq 4 ] || { cat "$WORK/fast3.log" >&2; fail "(b) exit status $rc, expected 4 (a failed group), not the MPI library's"; }
check fast3 '
assert sorted(recs) == [0, 1, 2], sorted(recs)
for r, rec in recs.items():
    assert rec["triggers"][0]["reason"] == "error" and rec["triggers"][0]["trigger"]["detected_by"] == "agreement", rec["triggers"][0]
assert d["verdict"] == "mismatch" and d["culprit"]["rank"] == 1, d["culprit"]
assert (s["class"], s["culprit_rank"], s["step"], s["phase"]) == ("mismatch", 1, 2, "backward"), s
'
pass "(b) fast mode W=3, a wrong count in the library all-reduce: every rank dumps, exit 4, mismatch on rank 1"

rc=$(run_job det3 3 --deterministic --inject wrong-count:rank=1,step=2,phase=backward)
[ "$rc" -eq 4 ] || { cat "$WORK/det3.log" >&2; fail "(c) exit status $rc, expected 4"; }
! grep -q "deterministic gradient sum" "$WORK/det3.log" || fail "(c) a rank summed garbage (the exact-sum bound fired)"
check det3 '
assert sorted(recs) == [0, 1, 2], sorted(recs)
for r in (0, 2):
    t = recs[r]["triggers"][0]["trigger"]
    assert "untrusted input from world rank(s) 1" in t["error"], t
    assert t["agreement"]["untrusted_input_from"] == [1], t["agreement"]
assert "disagrees with the majority" in recs[1]["triggers"][0]["trigger"]["error"]
assert d["verdict"] == "mismatch" and d["culprit"]["rank"] == 1, d["culprit"]
assert (s["class"], s["culprit_rank"], s["step"], s["phase"]) == ("mismatch", 1, 2, "backward"), s
'
pass "(c) deterministic W=3, a wrong count in the gradient reduction: ranks 0, 2 call rank 1 untrusted; rank 1 named"
