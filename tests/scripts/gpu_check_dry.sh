#!/usr/bin/env bash
# scripts/gpu-check.sh without a device: the script parses (bash -n) and is shellcheck-clean (where
# the tool is installed), bad arguments exit 2, --list prints every stage, and --dry-run runs
# every stage on the CPU with tiny sizes: each writes <stage>.json with its status and figures,
# [gpu] tests skip with exit 77, deterministic 2 vs 1 rank is BITWISE, and summary.json lists all
# eleven stages as passed; the verdict check fails on a verdict other than BITWISE. (On a device
# the same stages run at full size: docs/PERFORMANCE.md.)
#
# Usage: gpu_check_dry.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/gpu-check.sh"

bash -n "$script" || fail "bash -n $script"
if command -v shellcheck >/dev/null; then
  shellcheck "$script" || fail "shellcheck $script"
  pass "gpu-check.sh parses and is shellcheck-clean"
else
  pass "gpu-check.sh parses (shellcheck not installed: skipped)"
fi
rc=0; "$script" --part 3 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "--part 3 exited $rc, not 2"
rc=0; "$script" --bogus >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "an unknown argument exited $rc, not 2"
[ "$("$script" --list | grep -c ' limit ')" -eq 11 ] || fail "--list does not show eleven stages"
pass "bad arguments exit 2; --list shows the eleven stages"

OUT="$WORK/out" BUILD_DIR="$(dirname "$BIN_DIR")" FORTUNES="$WORK/fortunes/fortunes.h5" \
  "$script" --dry-run >"$WORK/dry.log" 2>&1 || { cat "$WORK/dry.log" >&2; fail "the dry run failed"; }
checks gpu-check-dry "$WORK/out/gpu-check" || fail "the dry run's JSON"
pass "the dry run passes every stage and writes their JSON"

# The check that replaced gpu-check.sh's eval of a string: a verdict other than BITWISE fails it,
# naming both (a device's deterministic_bitwise stage then fails).
echo '{"verdict": "DIFFERENT"}' >"$WORK/different.json"
expect_exit 1 "verdict DIFFERENT, expected BITWISE" \
  python3 "$(dirname "$script")/lib/gpu_check.py" expect-verdict "$WORK/different.json" BITWISE
pass "gpu_check expect-verdict fails on a verdict other than BITWISE"
