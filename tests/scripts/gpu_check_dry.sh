#!/usr/bin/env bash
# gpu-check without a device: bad arguments exit 2, --list prints every stage (through the thin
# scripts/gpu-check.sh too), and --dry-run runs every stage on the CPU with tiny sizes: each writes
# <stage>.json with its status and figures, [gpu] tests skip with exit 77, deterministic 2 vs 1 rank
# is BITWISE, and summary.json lists all eleven stages as passed. (On a device the same stages run
# at full size: docs/PERFORMANCE.md. The verdict rule, the budget rule and each stage's result are
# unit tests: tests/test_gpu_check.cpp.)
#
# Usage: gpu_check_dry.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
tool="$BIN_DIR/gpu-check"
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/gpu-check.sh"

bash -n "$script" || fail "bash -n $script"
if command -v shellcheck >/dev/null; then shellcheck "$script" || fail "shellcheck $script"; fi
rc=0; "$tool" --part 3 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "--part 3 exited $rc, not 2"
rc=0; "$tool" --bogus >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "an unknown argument exited $rc, not 2"
rc=0; "$tool" --only env,nope --list >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "--only with an unknown stage exited $rc, not 2"
[ "$(GPU_CHECK="$tool" "$script" --list | grep -c ' limit ')" -eq 11 ] || fail "--list does not show eleven stages"
pass "bad arguments exit 2; --list (through scripts/gpu-check.sh) shows the eleven stages"

OUT="$WORK/out" BUILD_DIR="$(dirname "$BIN_DIR")" FORTUNES="$WORK/fortunes/fortunes.h5" \
  "$tool" --dry-run >"$WORK/dry.log" 2>&1 || { cat "$WORK/dry.log" >&2; fail "the dry run failed"; }
checks gpu-check-dry "$WORK/out/gpu-check" || fail "the dry run's JSON"
pass "the dry run passes every stage and writes their JSON"

# The budget rule end to end: a stage whose limit does not fit is skipped, says why, fails nothing.
OUT="$WORK/skip" PART_BUDGET_S=10 BUILD_DIR="$(dirname "$BIN_DIR")" "$tool" --dry-run --only env,build \
  >"$WORK/skip.log" 2>&1 || { cat "$WORK/skip.log" >&2; fail "a part of skipped stages exited nonzero"; }
jq -e '.status == "skipped" and (.reason | startswith("part budget: 0s used of 10s"))' "$WORK/skip/gpu-check/env.json" \
  >/dev/null || fail "env.json: not skipped by the budget rule"
# A SIGTERM from an outer limit: the stage in flight is ended and recorded, summary.json written, 143.
OUT="$WORK/term" BUILD_DIR="$(dirname "$BIN_DIR")" FORTUNES="$WORK/fortunes/fortunes.h5" "$tool" --dry-run \
  --only resume_cross_device >"$WORK/term.log" 2>&1 &
pid=$!
sleep 3
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
[ "$rc" -eq 143 ] || { cat "$WORK/term.log" >&2; fail "gpu-check stopped by SIGTERM exited $rc, not 143"; }
jq -e '.stages == [{"stage": "resume_cross_device", "status": "interrupted", "seconds": .stages[0].seconds,
                    "reason": "the part was stopped during this stage"}]' "$WORK/term/gpu-check/summary.json" \
  >/dev/null || fail "summary.json after SIGTERM: $(cat "$WORK/term/gpu-check/summary.json")"
pass "the budget rule skips a stage that does not fit; SIGTERM ends the stage in flight, summary written, exit 143"
