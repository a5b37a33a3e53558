#!/usr/bin/env bash
# hang-diagnose's exit codes and its one-line errors, through the binary: a skipped collective at
# W=2 (exit 1, culprit rank 1 in --json), a healthy job (exit 0), a killed rank found through the
# run directory (exit 1, culprit rank 3), and unusable input (exit 2 with the file named): malformed
# JSON, a truncated file, format_version 2, mixed job_id, two dumps of one rank, an empty directory.
# Synthetic dumps written to docs/FORMATS.md "Flight record" by python3.
#
# Usage: hang_diagnose_cli.sh BIN_DIR WORK_DIR
set -euo pipefail
BIN_DIR=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK"
TOOL="$BIN_DIR/hang-diagnose"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# make_dump FILE RANK WORLD REASON LAST_STARTED STATE_OF_SEQ_5 [JOB_ID]: seq 1..4 completed in
# group dp; seq 5 recorded with the given state ("none": not submitted).
make_dump() {
  python3 - "$@" <<'PY'
import json, sys
path, rank, world, reason, state5 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[6]
job = sys.argv[7] if len(sys.argv) > 7 else "job-1"
t0 = 1.7e9
def entry(seq, state):
    started = state not in ("queued", "skipped")
    return {"id": seq, "seq": seq, "op": "AllReduce", "group": "dp", "dtype": "float32", "numel": 1024,
            "bytes": 4096, "root": -1, "step": (seq + 1) // 2, "phase": "backward", "state": state,
            "t_enqueue": t0 + seq, "t_start": t0 + seq if started else None,
            "t_end": t0 + seq + 0.01 if state == "completed" else None}
entries = [entry(s, "completed") for s in range(1, 5)]
if state5 != "none":
    entries.append(entry(5, state5))
group = {"name": "dp", "rank": rank, "size": world, "world_ranks": list(range(world)), "phase": None,
         "last_enqueued_seq": 5 if state5 != "none" else 4, "last_started_seq": int(sys.argv[5]),
         "last_completed_seq": 4, "capacity": 2048, "dropped": 0, "entries": entries}
timeout = reason == "timeout"
dump = {"format": "shardtrain-flight-record", "format_version": 3, "job_id": job, "rank": rank,
        "world_size": world, "hostname": "h", "pid": 100 + rank, "code_version": "test", "reason": reason,
        "dumped_at": t0 + 305, "timed_out_group": "dp" if timeout else None,
        "trigger": {"group": "dp", "seq": 5, "op": "AllReduce", "timeout_ms": 300000} if timeout else None,
        "triggers": [], "now": {"phase": "forward", "step": 3, "since": t0 + 4.5}, "phases": [], "groups": [group]}
json.dump(dump, open(path, "w"))
PY
}

# run_tool EXPECTED_EXIT ARGS...: runs hang-diagnose, keeps stdout in $WORK/out and stderr in $WORK/err.
run_tool() {
  local want=$1; shift
  local rc=0
  "$TOOL" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  echo "  hang-diagnose $* -> exit $rc"
  [ "$rc" -eq "$want" ] || { cat "$WORK/out" "$WORK/err" >&2; fail "expected exit $want, got $rc"; }
}
# expect_error FILE_NAMED WHAT: stderr is one 'error: ...' line naming the file and the problem.
expect_error() {
  [ "$(wc -l <"$WORK/err")" -eq 1 ] || { cat "$WORK/err" >&2; fail "expected one error line"; }
  grep -q "error: .*$1.*$2" "$WORK/err" || { cat "$WORK/err" >&2; fail "error does not name $1 ($2)"; }
  sed 's/^/    /' "$WORK/err"
}

# A skipped collective: rank 0 timed out in seq 5, rank 1 skipped it.
skip="$WORK/skip" && mkdir -p "$skip"
make_dump "$skip/flight.rank0.json" 0 2 timeout 5 timed_out
make_dump "$skip/flight.rank1.json" 1 2 signal 4 skipped
run_tool 1 --json "$skip"
python3 - "$WORK/out" <<'PY' || fail "--json does not name rank 1 as the skipping culprit"
import json, sys
d = json.load(open(sys.argv[1]))
print("  verdict", d["verdict"], "culprit", d["culprit"])
assert d["format"] == "shardtrain-hang-diagnosis" and d["verdict"] == "hang"
assert d["culprit"]["rank"] == 1 and d["culprit"]["cause"] == "skipped"
assert d["blocked"]["seq"] == 5 and d["blocked"]["not_joined"] == [1]
PY
run_tool 1 "$skip/flight.rank0.json" "$skip/flight.rank1.json"
grep -q "^verdict: hang" "$WORK/out" || fail "text report lacks 'verdict: hang'"
pass "skipped collective: exit 1, culprit rank 1"

# No hang: every rank completed seq 1..4.
ok="$WORK/ok" && mkdir -p "$ok"
for r in 0 1; do make_dump "$ok/flight.rank$r.json" $r 2 requested 4 none; done
run_tool 0 "$ok"
grep -q "no hang found" "$WORK/out" || fail "no 'no hang found'"
pass "healthy job: exit 0"

# A killed rank: 3 of 4 dumps.
killed="$WORK/killed" && mkdir -p "$killed"
for r in 0 1 2; do make_dump "$killed/flight.rank$r.json" $r 4 timeout 5 timed_out; done
run_tool 1 --json "$killed"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); c=d['culprit']; assert d['format_version']==2 and {k: c[k] for k in ('rank','cause','job_wide','host')}=={'rank':3,'cause':'no-dump','job_wide':False,'host':None} and d['summary']['culprit_host'] is None and d['missing_ranks']==[3], c" \
  "$WORK/out" || fail "killed rank 3 not named"
pass "killed rank: exit 1, culprit rank 3 (no dump)"

# Unusable input: exit 2, one line naming the file.
bad="$WORK/bad" && mkdir -p "$bad"
good="$ok/flight.rank0.json"
echo '{"format": shardtrain' >"$bad/malformed.json"
run_tool 2 "$good" "$bad/malformed.json" && expect_error malformed.json "malformed JSON"
head -c 200 "$ok/flight.rank1.json" >"$bad/truncated.json"
run_tool 2 "$good" "$bad/truncated.json" && expect_error truncated.json "truncated"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['format_version']=2; json.dump(d, open(sys.argv[2],'w'))" \
  "$ok/flight.rank1.json" "$bad/v2.json"
run_tool 2 "$good" "$bad/v2.json" && expect_error v2.json "format_version 2"
make_dump "$bad/other_job.json" 1 2 requested 4 none job-2
run_tool 2 "$good" "$bad/other_job.json" && expect_error other_job.json "different jobs"
cp "$good" "$bad/copy.json"
run_tool 2 "$good" "$bad/copy.json" && expect_error copy.json "second dump of rank 0"
mkdir -p "$WORK/empty"
run_tool 2 "$WORK/empty" && expect_error empty "no flight.rank"
pass "unusable input: exit 2 naming the file"
