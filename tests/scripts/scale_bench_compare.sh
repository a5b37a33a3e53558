#!/usr/bin/env bash
# scale-bench compare end to end (issue 48): testdata/compare/tiny.json runs ddp-train fast and
# --deterministic at W=2 on a tiny model, 2 alternating rounds; the table has one row per round and
# variant, the medians lines, the checks and "# wrong: 0", and --json the same figures for jq.
# Then the failures: a variant that writes no summary is counted in #wrong (exit 1), a malformed
# spec is refused in one line naming the file and the field (exit 2), an unknown --set key too.
#
# Usage: scale_bench_compare.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
SPEC="$(cd "$(dirname "$0")/../.." && pwd)/testdata/compare/tiny.json"
SB="$BIN_DIR/scale-bench"

"$SB" compare "$SPEC" --data "$WORK" --work "$WORK/runs" --json "$WORK/figures.json" >"$WORK/table.txt" 2>"$WORK/err.log" ||
  { cat "$WORK/table.txt" "$WORK/err.log" >&2; fail "scale-bench compare exited $?"; }
sed 's/^/  /' "$WORK/table.txt"
grep -q '^#  round  variant     step_ms       tok_s       steps      wall_s    det/fast  #wrong$' "$WORK/table.txt" ||
  fail "no header line"
for r in 1 2; do
  for v in fast det; do
    grep -Eq "^ +$r  $v +[0-9.]+ +[0-9]+ +6 +[0-9.]+ +([0-9.]+|-) +0$" "$WORK/table.txt" || fail "no row for round $r, $v"
  done
done
grep -Eq '^  median  det +[0-9.]+ +[0-9]+ +6 +[0-9.]+ +[0-9.]+ +0$' "$WORK/table.txt" || fail "no medians line of det"
grep -q '^# check det/fast of det (median): .*: ok$' "$WORK/table.txt" || fail "no det/fast check line"
grep -q '^# wrong: 0$' "$WORK/table.txt" || fail "wrong is not 0"
# Alternating: round 2 ran det before fast (the logs' modification times).
[ "$WORK/runs/r2/det.log" -ot "$WORK/runs/r2/fast.log" ] || fail "round 2 did not run det first"
pass "the table: 4 rows, medians, the checks, wrong 0; round 2 reversed"

# The JSON: the same rows, the ratio per round = det's step / fast's step of that round.
jq -e '.format == "shardtrain-compare" and .wrong == 0 and (.rows | length) == 4 and (.medians | length) == 2
       and ([.checks[] | .ok] | all) and (.checks | length) == 5' "$WORK/figures.json" >/dev/null || fail "figures.json"
jq -e '[.rows[] | select(.round == 1)] as $r | ($r[1].values["det/fast"] - $r[1].values.step_ms / $r[0].values.step_ms
       | fabs) < 1e-9' "$WORK/figures.json" >/dev/null || fail "round 1's det/fast is not det / fast"
jq -e --slurpfile s "$WORK/runs/r1/det/summary.json" \
   '(.rows[] | select(.round == 1 and .variant == "det") | .values.tok_s) == $s[0].throughput_tokens_per_s' \
   "$WORK/figures.json" >/dev/null || fail "tok_s is not the summary's"
pass "--json: the rows, the ratio of the round's pair, the summary's own numbers"

# --reread: the same figures from the kept runs, nothing run; then a changed check counts wrong.
"$SB" compare "$SPEC" --data "$WORK" --work "$WORK/runs" --reread --json "$WORK/reread.json" >/dev/null ||
  fail "--reread exited $?"
[ "$(jq -S . "$WORK/reread.json")" = "$(jq -S . "$WORK/figures.json")" ] || fail "--reread gave other figures"
jq '.checks[1].max = 1.0' "$SPEC" >"$WORK/strict.json"
rc=0
"$SB" compare "$WORK/strict.json" --data "$WORK" --work "$WORK/runs" --reread >"$WORK/strict.txt" || rc=$?
[ "$rc" = 1 ] && grep -q '^# check det/fast of det (median): .*bound <= 1: WRONG$' "$WORK/strict.txt" ||
  { cat "$WORK/strict.txt" >&2; fail "a tighter bound on the kept runs: exit $rc"; }
pass "--reread: the same JSON from the kept runs; a tighter det/fast bound is wrong there (exit 1)"

# A variant that ran but wrote nothing: its readings are missing, counted wrong, exit 1.
rc=0
"$SB" compare "$SPEC" --data "$WORK" --rounds 1 --set broken=yes --set steps=2 >"$WORK/broken.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/broken.txt" >&2; fail "a missing value exited $rc, not 1"; }
grep -Eq '^ +1  silent +missing +missing +missing +[0-9.e+-]+ +- +4$' "$WORK/broken.txt" ||
  { cat "$WORK/broken.txt" >&2; fail "no silent row with 4 wrong (3 missing, the steps check)"; }
pass "a run that wrote no figures: 'missing' cells, counted in #wrong, exit 1"

# Malformed spec and settings: exit 2, one line naming the file and the field.
jq '.variants[1].command[3] = "{tool}"' "$SPEC" >"$WORK/bad.json"
expect_exit2 "$WORK/bad.json: the benchmark spec field /variants/1/command/3: unknown placeholder {tool}" \
  "$SB" compare "$WORK/bad.json"
jq '.checks[0].every_rounds = true' "$SPEC" >"$WORK/bad2.json"
expect_exit2 "field /checks/0/every_rounds is not a field of the benchmark spec here" "$SB" compare "$WORK/bad2.json"
expect_exit2 "--set stepz: $SPEC has no option stepz" "$SB" compare "$SPEC" --set stepz=3
pass "malformed specs and --set keys: exit 2 with one line"
