#!/usr/bin/env bash
# scale-bench run + report end to end: a small model at W = 1, 2 and 4 (weak scaling; W = 4 is
# oversubscribed on a 2-core machine and must be marked so), then the report's files: report.json
# and report.md with the E formula line (its numbers checked against report.json), the
# oversubscribed mark, the step-log recomputation; the SVG plots parse as XML and show every
# point (one marker and one label per W; one bar label per rank and W). Bad inputs exit 2: a
# folder without summary.json, runs of different models, --workers 0 or malformed.
#
# Usage: scale_report.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
SB="$BIN_DIR/scale-bench"
args=(--data "$DATA" --seq-len 64 --layers 2 --heads 2 --d-model 64 --peak-gflops 100 --steps 12
      --micro-batch 4 --global-batch 4 --log-every 1000)

out="$WORK/series"
"$SB" run --workers 1,2,4 --out "$out" -- "${args[@]}" >"$WORK/run.log" 2>&1 ||
  { cat "$WORK/run.log" >&2; fail "scale-bench run failed"; }
sed 's/^/  /' "$WORK/run.log"
for f in report.json report.md efficiency.svg speedup.svg breakdown.svg w1/summary.json w2/summary.json w4/summary.json; do
  [ -s "$out/$f" ] || fail "no $out/$f"
done
pass "scale-bench run wrote three run folders, report.json, report.md and three SVGs"

# report.json: weak mode, the batches scaled, the oversubscribed marks against this host's CPUs,
# the recomputation present; report.md: the formula line with the numbers of report.json.
checks scale-report "$out" || fail "report.json / report.md checks"
pass "report.json and report.md: weak scaling, oversubscribed marked, formula matches, recomputation present"

# The plots: XML, one marker and one label per W (measured and oversubscribed series each add one
# marker in the key), every (W, rank) bar labelled.
checks scale-svgs "$out" || fail "SVG checks"
pass "SVGs parse and show every point and every rank's bar"

# Without an oversubscribed point (W = 1 and 2 on a host of >= 2 CPUs) no plot names the series.
cpus=$(jq -er .host.cpus "$out/w1/summary.json")
if [ "$cpus" -ge 2 ]; then
  "$SB" report --out "$WORK/w12" "$out/w1" "$out/w2" >/dev/null
  for f in efficiency speedup breakdown; do
    ! grep -q "oversub" "$WORK/w12/$f.gp" || fail "$f.gp names an oversubscribed series without an oversubscribed point"
    ! grep -q "oversub" "$WORK/w12/$f.svg" || fail "$f.svg mentions oversubscription without an oversubscribed point"
  done
  pass "W=1,2 on $cpus CPUs: no plot mentions oversubscription"
fi

# Bad inputs: exit 2 and a line naming the culprit.
expect_usage() { local want=$1; shift; expect_exit2 "$want" "$SB" "$@"; }
mkdir -p "$WORK/empty"
expect_usage "$WORK/empty" report --out "$WORK/bad" "$out/w1" "$WORK/empty"
mkdir -p "$WORK/other"
# The same options but one layer more: another model (and config hash).
other=("${args[@]}")
other[5]=3  # --layers 2 -> 3
[ "${other[4]}" = --layers ] || fail "the test's own argument list changed"
mpirun -np 1 "$BIN_DIR/ddp-train" "${other[@]}" --run-dir "$WORK/other/big" >"$WORK/other.log" 2>&1 ||
  { cat "$WORK/other.log" >&2; fail "the other model's run"; }
expect_usage "$out/w1 and $WORK/other/big are runs of different training problems (model differs" \
  report --out "$WORK/bad" "$out/w1" "$WORK/other/big"
expect_usage "two runs at W=1" report --out "$WORK/bad" "$out/w1" "$out/w1"
expect_usage "--workers 0" run --workers 0 --out "$WORK/bad" -- "${args[@]}"
expect_usage "--workers 1,,2" run --workers 1,,2 --out "$WORK/bad" -- "${args[@]}"
[ ! -e "$WORK/bad/report.json" ] || fail "a refused report wrote report.json"
pass "bad inputs exit 2 naming the folder or the option"

# --step-model: the model's E(W) beside every measured point, and its curve in the efficiency plot.
"$BIN_DIR/scale-bench" predict --example seed-lab --json >"$WORK/seed.json"
jq -e .model "$WORK/seed.json" >"$WORK/model.json"
"$BIN_DIR/scale-bench" report --out "$WORK/predicted" --step-model "$WORK/model.json" "$out/w1" "$out/w2" "$out/w4" >/dev/null
checks model-prediction "$WORK/predicted" "$WORK/seed.json" || fail "the report does not show the model's prediction"
pass "--step-model fills the predicted column and draws the model's curve"
# The option's name before issue 46 (--model now names a shape): one line saying what to write.
expect_usage "--step-model $WORK/model.json" report --out "$WORK/old" --model "$WORK/model.json" "$out/w1" "$out/w2"
[ ! -e "$WORK/old" ] || fail "a refused report wrote $WORK/old"
pass "report --model FILE, the old form, exits 2 naming --step-model"
