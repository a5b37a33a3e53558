#!/usr/bin/env bash
# Straggler scores end to end through ddp-train: one rank sleeps 150 ms a step in one section
# (--inject slow-data:rank=R,ms=150: the data loader; delay:rank=R,ms=150,phase=P: on entering
# phase P), at W = 2 and W = 4 (oversubscribed). The summary's "stragglers" names exactly that
# rank in that section and no other (rank, section), waited_for is that rank, and rank 0's live
# lines at the log steps name it and nobody else.
# The delay (150 ms) is far above the noise of 4 ranks on 2 cores, so the checks are deterministic.
#
# Usage: stragglers.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"

steps=24 log_every=8 window=5
# check_straggler NP RANK SECTION SPEC
check_straggler() {
  local np=$1 slow=$2 section=$3 spec=$4
  local dir="$WORK/w${np}_$section"
  # common.sh's train() fixes --log-every; this test needs its own.
  mpirun -np "$np" --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 \
    --d-model 32 --peak-gflops 100 --steps $steps --global-batch 8 --micro-batch 2 --ckpt-every 8 \
    --log-every $log_every --straggler-window $window --inject "$spec" --run-dir "$dir" \
    >"$dir.log" 2>&1 || { cat "$dir.log" >&2; fail "W=$np $spec: ddp-train failed"; }
  echo "  W=$np --inject $spec"
  checks stragglers "$dir/summary.json" "$np" "$slow" "$section" ||
    fail "W=$np: the summary does not name exactly rank $slow in $section"
  # Rank 0's live lines: at steps 8, 16 and 24 (step 1 has fewer than `window` steps recorded).
  local live
  live=$(grep -E "step [0-9]+ stragglers: " "$dir.log" || true)
  echo "$live" | sed 's/^/  live: /'
  [ "$(echo "$live" | grep -c 'stragglers: ')" -eq $((steps / log_every)) ] ||
    { cat "$dir.log" >&2; fail "W=$np: expected $((steps / log_every)) live straggler lines"; }
  echo "$live" | grep -qvE "stragglers: rank $slow $section \([a-z]+ [0-9.]+, \+[0-9]+ ms/step\)$" &&
    fail "W=$np: a live line names something other than rank $slow $section"
  echo "$live" | grep -q "step $steps stragglers: rank $slow $section" || fail "W=$np: no live line at the last step"
  pass "W=$np: summary and live lines name rank $slow in $section, nobody else"
}

check_straggler 2 1 data slow-data:rank=1,ms=150
check_straggler 4 1 data slow-data:rank=1,ms=150
check_straggler 4 2 backward delay:rank=2,ms=150,phase=backward
