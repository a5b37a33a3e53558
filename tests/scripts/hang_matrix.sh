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
  start=$(date +%s.%N)
  mpirun -np "$W" --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 \
    --d-model 32 --peak-gflops 100 --log-every 1000 --steps 6 --global-batch 8 --micro-batch 2 --ckpt-every 2 \
    --collective-timeout $timeout_s --inject "$spec" --run-dir "$dir" >"$dir.log" 2>&1 || rc=$?
  local elapsed
  elapsed=$(python3 -c "import time; print(round(time.time() - $start, 1))")
  [ "$rc" -ne 0 ] || { cat "$dir.log" >&2; fail "$name: the faulty job exited 0"; }
  python3 -c "import sys; sys.exit(0 if $elapsed <= $timeout_s + 10 else 1)" ||
    fail "$name: the job took ${elapsed}s to stop, more than the timeout + 10 s"
  local out drc=0
  out=$("$BIN_DIR/hang-diagnose" --json "$dir" 2>"$dir.diagnose.err") || drc=$?
  [ "$drc" -eq 1 ] || { cat "$dir.log" "$dir.diagnose.err" >&2; echo "$out" >&2; fail "$name: hang-diagnose exited $drc, expected 1"; }
  echo "$out" >"$dir.diagnosis.json"
  python3 - "$dir" "$dir.diagnosis.json" "$spec" "$cause" "$culprit" "$W" <<'PY' ||
import glob, json, re, sys
run, diag_path, spec, cause, culprit, W = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
d = json.load(open(diag_path))
kind = spec.split(":")[0]
fields = dict(kv.split("=") for kv in spec.split(":")[1].split(","))
step = int(fields["step"])
phase = fields.get("phase", "forward" if kind in ("hang", "kill") else None)
dumps = {json.load(open(f))["rank"]: json.load(open(f)) for f in glob.glob(f"{run}/flight.rank*.json")}

def entries(rank, group):
    g = [g for g in dumps[rank]["groups"] if g["name"] == group]
    return g[0]["entries"] if g else []

# The expected blocked collective, from the dumps.
if kind == "skip-collective":
    skipped = [e for g in dumps[culprit]["groups"] for e in g["entries"] if e["state"] == "skipped"]
    assert len(skipped) == 1, f"the culprit's dump should hold one skipped entry, has {len(skipped)}"
    want = skipped[0]
elif kind == "wrong-count":
    short = [e for g in dumps[culprit]["groups"] for e in g["entries"]
             if e["step"] == step and e["phase"] == phase and e["state"] != "completed"]
    assert short, "the culprit's dump should hold the short collective, not completed"
    want = short[0]
else:
    # The group a healthy rank was waiting in; the collective there the culprit never submitted
    # (its last submitted seq + 1; without its dump, the healthy ranks' earliest pending one).
    healthy = [r for r in dumps if r != culprit]
    pending = [e for r in healthy for g in dumps[r]["groups"] for e in g["entries"]
               if e["state"] in ("started", "timed_out", "aborted")]
    assert pending, "no healthy rank was waiting in a collective"
    first = min(pending, key=lambda e: (e["t_start"] or 0))
    if culprit in dumps:
        mine = [g for g in dumps[culprit]["groups"] if g["name"] == first["group"]]
        seq = (mine[0]["last_enqueued_seq"] if mine else 0) + 1
        want = [e for r in healthy for e in entries(r, first["group"]) if e["seq"] == seq][0]
    else:
        want = first
print(f"  expected: {want['group']} seq {want['seq']} {want['op']} step {want['step']} phase {want['phase']}")
c, b = d["culprit"], d["blocked"]
print(f"  hang-diagnose: verdict {d['verdict']}, culprit {c}, blocked "
      f"{b and (b['group'], b['seq'], b['op'], b['step'], b['phase'], b['joined'], b['not_joined'], b['no_dump'])}")
if cause == "ambiguous":
    # Two ranks that disagree on a size at their first collective of that kind: no majority and
    # no earlier step to compare with, so no rank can be blamed; both must be named.
    assert d["verdict"] == "ambiguous" and c is None, f"verdict {d['verdict']}, culprit {c}"
    assert sorted(d["candidates"]) == list(range(W)), f"candidates {d['candidates']}"
else:
    assert c is not None and c["rank"] == culprit, f"culprit {c}, expected rank {culprit}"
    assert c["cause"] == cause, f"cause {c['cause']}, expected {cause}"
assert b is not None, "no blocked collective reported"
got = (b["group"], b["seq"], b["op"])
assert got == (want["group"], want["seq"], want["op"]), f"blocked {got}, expected {(want['group'], want['seq'], want['op'])}"
assert b["step"] == want["step"] and b["phase"] == want["phase"], f"blocked step/phase {b['step']}/{b['phase']}"
if kind == "skip-collective" or kind == "wrong-count":
    assert want["step"] == step, f"the injected step {step}, recorded {want['step']}"
if kind == "hang":
    now = [r for r in d["ranks"] if r["rank"] == culprit][0]["now"]
    assert (now["phase"], now["step"]) == (phase, step), f"hung rank at {now}, injected {phase} step {step}"
if kind == "kill":
    assert d["missing_ranks"] == [culprit], f"missing ranks {d['missing_ranks']}"
if kind == "wrong-count":
    m = [x for x in d["mismatches"] if x["field"] == "numel" and x["seq"] == want["seq"]]
    assert m, f"no numel mismatch at seq {want['seq']}: {d['mismatches']}"
    assert m[0]["values"][str(culprit)] == want["numel"], m[0]
PY
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
