#!/usr/bin/env bash
# hang-diagnose's exit codes and its one-line errors, through the binary: a skipped collective at
# W=2 (exit 1, culprit rank 1 in --json), a healthy job (exit 0), a killed rank found through the
# run directory (exit 1, culprit rank 3), and unusable input (exit 2 with the file named): malformed
# JSON, a truncated file, format_version 2, mixed job_id, two dumps of one rank, an empty directory.
# Synthetic dumps written to docs/FORMATS.md "Flight record" (checks make-flight-dump).
#
# Usage: hang_diagnose_cli.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"  # strict mode, a fresh WORK, fail/pass, checks (its dataset is unused)
TOOL="$BIN_DIR/hang-diagnose"

# make_dump FILE RANK WORLD REASON LAST_STARTED STATE_OF_SEQ_5 [JOB_ID]: seq 1..4 completed in
# group dp; seq 5 recorded with the given state ("none": not submitted).
make_dump() { checks make-flight-dump "$@"; }

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
checks skipped-by "$WORK/out" 1 5 || fail "--json does not name rank 1 as the skipping culprit"
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
checks no-dump-culprit "$WORK/out" 3 || fail "killed rank 3 not named"
pass "killed rank: exit 1, culprit rank 3 (no dump)"

# Unusable input: exit 2, one line naming the file.
bad="$WORK/bad" && mkdir -p "$bad"
good="$ok/flight.rank0.json"
echo '{"format": shardtrain' >"$bad/malformed.json"
run_tool 2 "$good" "$bad/malformed.json" && expect_error malformed.json "malformed JSON"
head -c 200 "$ok/flight.rank1.json" >"$bad/truncated.json"
run_tool 2 "$good" "$bad/truncated.json" && expect_error truncated.json "truncated"
checks make-format-version "$ok/flight.rank1.json" "$bad/v2.json" 2
run_tool 2 "$good" "$bad/v2.json" && expect_error v2.json "format_version 2"
make_dump "$bad/other_job.json" 1 2 requested 4 none job-2
run_tool 2 "$good" "$bad/other_job.json" && expect_error other_job.json "different jobs"
cp "$good" "$bad/copy.json"
run_tool 2 "$good" "$bad/copy.json" && expect_error copy.json "second dump of rank 0"
mkdir -p "$WORK/empty"
run_tool 2 "$WORK/empty" && expect_error empty "no flight.rank"
pass "unusable input: exit 2 naming the file"
