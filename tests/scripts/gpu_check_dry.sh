#!/usr/bin/env bash
# scripts/gpu-check.sh without a device: the script parses (bash -n) and is shellcheck-clean (when
# shellcheck is installed), bad arguments exit 2, --list prints every stage, and --dry-run runs
# every stage on the CPU with tiny sizes: each writes <stage>.json with its status and figures,
# [gpu] tests skip with exit 77, deterministic 2 vs 1 rank is BITWISE, and summary.json lists all
# eleven stages as passed. (On a device the same stages run at full size: docs/PERFORMANCE.md.)
#
# Usage: gpu_check_dry.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
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
python3 - "$WORK/out/gpu-check" <<'PY' || fail "the dry run's JSON"
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
names = [x["stage"] for x in s["stages"]]
assert s["dry_run"] and len(names) == 11, names
assert all(x["status"] == "pass" for x in s["stages"]), s["stages"]
for n in names:
    j = json.load(open(f"{d}/{n}.json"))
    assert set(j) >= {"stage", "status", "seconds", "limit_s", "exit_code", "log", "result"}, (n, sorted(j))
assert json.load(open(f"{d}/gpu_tests.json"))["result"]["skipped_no_device"]
assert json.load(open(f"{d}/deterministic_bitwise.json"))["result"]["verdict"] == "BITWISE"
g = json.load(open(f"{d}/gpt2_124m.json"))["result"]
assert g["flops_per_token_6N_12LTC"] == g["flops_per_token_trainer"], g
assert [r["workers"] for r in json.load(open(f"{d}/cpu_scaling.json"))["result"]["table"]] == [1, 2]
print("  stages:", ", ".join(f"{x['stage']} {x['seconds']:.0f}s" for x in s["stages"]))
PY
pass "the dry run passes every stage and writes their JSON"
