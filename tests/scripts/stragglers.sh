#!/usr/bin/env bash
# Straggler scores end to end through ddp-train: with rank 1 sleeping 150 ms a step
# (--inject delay:rank=1,ms=150), at W = 2 and W = 4 (oversubscribed), the summary's "stragglers"
# names rank 1 in section "other" and no other (rank, section), waited_for is rank 1, and rank 0's
# live lines at the log steps name rank 1 other and nobody else.
# The injected sleep runs before the batch is asked for (StepLoop::run_one_step calls
# Communicator::maybe_delay() before BatchLoader::next()), so it is in step_s and in no timing
# column: "other" (step_s minus the six columns) is where it lands, not data_s.
# The delay (150 ms) is far above the noise of 4 ranks on 2 cores, so the checks are deterministic.
#
# Usage: stragglers.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"

steps=24 log_every=8 window=5
for np in 2 4; do
  dir="$WORK/w$np"
  # common.sh's train() fixes --log-every; this test needs its own.
  mpirun -np "$np" --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 \
    --d-model 32 --peak-gflops 100 --steps $steps --global-batch 8 --micro-batch 2 --ckpt-every 8 \
    --log-every $log_every --straggler-window $window --inject delay:rank=1,ms=150 --run-dir "$dir" \
    >"$dir.log" 2>&1 || { cat "$dir.log" >&2; fail "W=$np: ddp-train failed"; }
  python3 - "$dir/summary.json" "$np" <<'PY' || fail "W=$np: the summary does not name exactly rank 1 in other"
import json, sys
s = json.load(open(sys.argv[1]))["stragglers"]
named = sorted({(x["rank"], x["section"]) for x in s["stragglers"]})
print(f"  summary stragglers: {[(x['rank'], x['section'], x['score'], round(x['value'], 3), round(1e3 * x['lost_s'], 1)) for x in s['stragglers']]}")
print(f"  not named: {[(x['rank'], x['section'], x['score'], x['why'][:6]) for x in s['not_named']]}; waited_for {s['waited_for']}")
assert named == [(1, "other")], f"named {named}, expected only (1, other)"
assert s["waited_for"] == 1, f"waited_for {s['waited_for']}"
assert s["threshold"] == 0.75 and s["window"] == 5, (s["threshold"], s["window"])
assert len(s["ranks"]) == int(sys.argv[2]), "one row per rank"
PY
  # Rank 0's live lines: at steps 8, 16 and 24 (step 1 has fewer than `window` steps recorded).
  live=$(grep -E "step [0-9]+ stragglers: " "$dir.log" || true)
  echo "$live" | sed 's/^/  live: /'
  [ "$(echo "$live" | grep -c 'stragglers: ')" -eq $((steps / log_every)) ] ||
    { cat "$dir.log" >&2; fail "W=$np: expected $((steps / log_every)) live straggler lines"; }
  echo "$live" | grep -qvE "stragglers: rank 1 other \([a-z]+ [0-9.]+, \+[0-9]+ ms/step\)$" &&
    fail "W=$np: a live line names something other than rank 1 other"
  echo "$live" | grep -q "step $steps stragglers: rank 1 other" || fail "W=$np: no live line at the last step"
  pass "W=$np: summary and live lines name rank 1 in other, nobody else"
done
