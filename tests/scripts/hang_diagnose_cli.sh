#!/usr/bin/env bash
# hang-diagnose's exit codes and its one-line errors, through the binary: a skipped collective at
# W=2 (exit 1, culprit rank 1 in --json), a healthy job (exit 0), a killed rank found through the
# run directory (exit 1, culprit rank 3), and unusable input (exit 2 with the file named): malformed
# JSON, a truncated file, format_version 2, mixed job_id, two dumps of one rank, an empty directory.
# The dumps are written by the comm engine itself (tests/flight_fixture.cpp: ranks as threads over
# the in-process fake transport, a real skip, timeout or missing rank).
#
# Usage: hang_diagnose_cli.sh BIN_DIR WORK_DIR FLIGHT_FIXTURE
BIN_DIR=$1 WORK=$2 FIXTURE=$3
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"  # strict mode, a fresh WORK, fail/pass, checks (its dataset is unused)
TOOL="$BIN_DIR/hang-diagnose"

# fixture SCENARIO DIR [JOB_ID]: a job's flight records in DIR (see tests/flight_fixture.cpp).
fixture() { "$FIXTURE" "$@" || fail "flight_fixture $* failed"; }

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

# A skipped collective: rank 1 skipped seq 5 of group dp, both ranks timed out in it.
skip="$WORK/skip"
fixture skip "$skip"
run_tool 1 --json "$skip"
checks skipped-by "$WORK/out" 1 5 || fail "--json does not name rank 1 as the skipping culprit"
run_tool 1 "$skip/flight.rank0.json" "$skip/flight.rank1.json"
grep -q "^verdict: hang" "$WORK/out" || fail "text report lacks 'verdict: hang'"
pass "skipped collective: exit 1, culprit rank 1"

# No hang: every rank completed seq 1..4, then dumped on request.
ok="$WORK/ok"
fixture healthy "$ok"
run_tool 0 "$ok"
grep -q "no hang found" "$WORK/out" || fail "no 'no hang found'"
pass "healthy job: exit 0"

# A killed rank: rank 3 stopped before seq 5; 3 of 4 dumps.
killed="$WORK/killed"
fixture killed "$killed"
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
fixture healthy "$WORK/other" job-2
cp "$WORK/other/flight.rank1.json" "$bad/other_job.json"
run_tool 2 "$good" "$bad/other_job.json" && expect_error other_job.json "different jobs"
cp "$good" "$bad/copy.json"
run_tool 2 "$good" "$bad/copy.json" && expect_error copy.json "second dump of rank 0"
mkdir -p "$WORK/empty"
run_tool 2 "$WORK/empty" && expect_error empty "no flight.rank"
pass "unusable input: exit 2 naming the file"
