#!/usr/bin/env bash
# Time from the first rank's collective timeout to the launcher's verdict line: W=4 ranks, rank 3
# skips a gradient all-reduce at step 2 (--inject skip-collective), --collective-timeout 3, under
# scripts/run-resilient.sh --max-restarts 0, ROUNDS times (default 5). The launcher measures it
# itself ("diagnosed in X s": from the earliest timeout trigger in the attempt's flight records to
# the verdict line, so it covers the teardown grace that lets every rank write its record (2 s,
# communicator.hpp "Timeouts"), mpirun's teardown, and hang-diagnose). Prints each round's verdict
# line and the median; checks that each names rank 3, skipped-collective.
#
# Usage: scripts/bench-verdict.sh [ROUNDS]
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-5}"
job=(--data "$here/data/markov.h5" --layers 2 --d-model 32 --heads 2 --seq-len 32 --global-batch 8 --micro-batch 2
     --steps 6 --collective-timeout 3 --inject skip-collective:rank=3,step=2)
for r in $(seq 1 "$rounds"); do
  "$here/scripts/run-resilient.sh" --max-restarts 0 --log "$tmp/restarts$r.json" -- \
    mpirun -np 4 "$build/bin/ddp-train" "${job[@]}" --run-dir "$tmp/run$r" 2>&1 | grep "verdict attempt" | tee -a "$tmp/lines" || true
done
figures verdict "$tmp/lines" "$rounds"
