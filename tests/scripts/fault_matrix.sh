#!/usr/bin/env bash
# The randomised fault matrix of issue 24: N cases drawn from a seeded generator over the world size
# (2..6), the fault (skip-collective, wrong-count, hang in compute, kill, slow-data, delay), its phase
# (data, forward, backward, optimizer, ckpt, eval), its step and rank, fast or deterministic mode,
# and the layout (DDP, ZeRO-1/2/3 through fsdp-train, TP=2 through ddp-train --tp 2). Each case runs
# once under scripts/run-resilient.sh --max-restarts 0, whose automatic verdict (hang-diagnose --json
# on the attempt's flight records) is checked:
#   - the job stops within the collective timeout + 10 s of the fault (the fault's time: the first
#     failure trigger in the records, less the timeout when that trigger was a timeout; a dead
#     rank's: the survivors' first record on mpirun's signal; the end: when the command exited);
#   - the verdict names the injected rank, the expected class and the fault's phase and step;
#   - "ambiguous" only where docs/RUNBOOK.md ("Undecidable cases") says no record can decide, with
#     that reason: a wrong count at W=2 in the first step that has the collective (two ranks, no
#     majority, no earlier step to compare with); a healthy rank is never named.
# A kill leaves no record of the dead rank, so its own phase is unknowable: its verdict's step and
# phase are those of the collective the survivors waited in (checked to be at or after the fault's step).
# The seed is printed first; `fault_matrix.sh BIN WORK SEED [N] [ONLY]` reruns the same draw (ONLY: one
# case index). Defaults: seed 24, N 40.
# Usage: fault_matrix.sh BIN_DIR WORK_DIR [SEED] [N] [ONLY]
BIN_DIR=$1 WORK=$2 SEED=${3:-24} N=${4:-40} ONLY=${5:-}
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
here="$(cd "$(dirname "$0")/../.." && pwd)"
launcher="$here/scripts/run-resilient.sh"
T=${FAULT_MATRIX_TIMEOUT:-3}  # --collective-timeout, seconds (short: every case waits for it once)
echo "fault matrix: seed $SEED, $N cases (rerun: $0 BIN_DIR WORK_DIR $SEED $N [CASE])"

# The draw: one line per case, "index W tool layout mode kind phase step rank spec expect_class".
checks fault-cases "$SEED" "$N" "$T" >"$WORK/cases.txt"

results="$WORK/results.txt"
: >"$results"
failures=0
while read -r i W tool layout mode kind phase step rank spec expect; do
  [ -n "$ONLY" ] && [ "$i" != "$ONLY" ] && continue
  dir="$WORK/case$i"
  args=(--data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 --peak-gflops 100 --log-every 1000
        --steps 6 --ckpt-every 2 --eval-every 2 --micro-batch 1 --collective-timeout "$T" --inject "$spec"
        --run-dir "$dir")
  case "$layout" in
    zero*) args+=(--zero-stage "${layout#zero}" --global-batch $((2 * W))) ;;
    tp2) args+=(--tp 2 --global-batch "$W") ;;
    *) args+=(--global-batch $((2 * W))) ;;
  esac
  [ "$mode" = det ] && args+=(--deterministic)
  start=$(date +%s.%N)
  rc=0
  "$launcher" --max-restarts 0 --backoff 0 --diagnose-bin "$BIN_DIR" -- \
    mpirun -np "$W" --oversubscribe "$BIN_DIR/$tool" "${args[@]}" >"$dir.log" 2>&1 </dev/null || rc=$?
  end=$(date +%s.%N)
  line=$(checks fault-case "$dir" "$rc" "$start" "$end" "$T" "$kind" "$phase" "$step" "$rank" "$expect")
  row="case $i: W=$W $layout $mode $spec -> expect $expect | $line"
  echo "$row" | tee -a "$results"
  if [[ "$line" == FAIL* ]]; then
    failures=$((failures + 1))
    grep "verdict attempt" "$dir.log" >&2 || tail -5 "$dir.log" >&2
  fi
done <"$WORK/cases.txt"
total=$(wc -l <"$results")
checks fault-times "$results"
[ "$failures" -eq 0 ] || fail "$failures of $total cases wrong (seed $SEED; rerun one: $0 BIN_DIR WORK_DIR $SEED $N CASE)"
pass "fault matrix, seed $SEED: $total cases, every verdict names the injected rank, class, phase and step"
