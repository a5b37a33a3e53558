#!/usr/bin/env bash
# The fault matrix under the two-level collectives (issue 47): 4 ranks placed as 2 nodes x 2 ranks
# on this machine (SHARDTRAIN_NODE_OF_RANK=a,a,b,b), each fault (a hang in compute, a skipped
# collective, a wrong count, a kill) on rank 3 (the second node's second rank) at step 3: DDP in
# backward under the flat all-reduce (the default, --allreduce auto) and --allreduce hierarchical,
# one piece and pipelined (--hierarchical-chunk), and ZeRO-3 in forward under --allreduce
# hierarchical (its two-level all-gathers; flat ZeRO is fault_matrix.sh's). 16 cases, about 12 s
# each on two cores (startup, the 3 s timeout, teardown). Each case runs once under
# scripts/run-resilient.sh --max-restarts 0, whose verdict (attempt0.verdict.json, from hang-diagnose's typed summary) must name:
#   - rank 3 and its host (this machine's: the placement is pretended) in every cell, never
#     another rank: not its node peer, not the ranks of the other node waiting on it;
#   - the class the fault has under the flat algorithm (hang-outside-collective, skipped-collective,
#     mismatch, dead-rank) and the fault's phase and step (a kill's: the survivors' blocked step,
#     at or after the kill's); the job stopped within the collective timeout + 10 s of the fault.
# The per-case checks are fault_matrix.sh's (checks.py fault-case) plus the host (culprit-host).
# With FAULT_BOX=DIR (fault_matrix_box.sh), the same cases run on the cluster in a box DIR of two
# nodes: mpirun inside `salloc -N2 -n4`, ranks 0-1 on node1 and 2-3 on node2 by their real host
# names (no pretended placement), and the culprit's host must be node2. BIN_DIR and WORK_DIR must
# then be on the box's shared folders (outside /tmp).
# Usage: fault_matrix_two_level.sh BIN_DIR WORK_DIR [ONLY]   (ONLY: the cases whose names match
# this extended regular expression whole: one name, or e.g. 'ddp_(flat|hier)_.*')
BIN_DIR=$1 WORK=$2 ONLY=${3:-}
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
here="$(cd "$(dirname "$0")/../.." && pwd)"
T=3  # --collective-timeout, seconds: every case waits for it once
W=4 RANK=3 STEP=3
# launch LAUNCHER_ARGS... -- TOOL ARGS...: run-resilient around mpirun, here or on the box.
if [ -n "${FAULT_BOX:-}" ]; then
  host=node2
  launch() {
    bash "$here/scripts/cluster/box.sh" exec "$FAULT_BOX" -- timeout 120 salloc -N2 -n"$W" -w "node[1-2]" --no-kill \
      "$BIN_DIR/run-resilient" "$@"
  }
  mpi=(mpirun)
else
  export SHARDTRAIN_NODE_OF_RANK=a,a,b,b
  host=$(hostname)
  launch() { "$here/scripts/run-resilient.sh" "$@"; }
  mpi=(mpirun -np "$W" --oversubscribe)
fi

declare -A class=([hang]=hang-outside-collective [skip-collective]=skipped-collective [wrong-count]=mismatch
                  [kill]=dead-rank)
results="$WORK/results.txt"
: >"$results"
failures=0
# run_case NAME TOOL PHASE KIND ALGORITHM_OPTIONS...
run_case() {
  local name=$1 tool=$2 phase=$3 kind=$4
  shift 4
  [ -n "$ONLY" ] && ! [[ "$name" =~ ^($ONLY)$ ]] && return 0
  local dir="$WORK/$name" spec="$kind:rank=$RANK,step=$STEP,phase=$phase"
  local args=(--data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 --peak-gflops 100 --log-every 1000
              --steps 5 --micro-batch 1 --global-batch $((2 * W)) --collective-timeout "$T" --inject "$spec"
              --run-dir "$dir" "$@")
  [ "$tool" = fsdp-train ] && args+=(--zero-stage 3)
  local start end rc=0
  start=$(date +%s.%N)
  launch --max-restarts 0 --backoff 0 --diagnose-bin "$BIN_DIR" -- \
    "${mpi[@]}" "$BIN_DIR/$tool" "${args[@]}" >"$dir.log" 2>&1 </dev/null || rc=$?
  end=$(date +%s.%N)
  local line
  line=$(checks fault-case "$dir" "$rc" "$start" "$end" "$T" "$kind" "$phase" "$STEP" "$RANK" "${class[$kind]}")
  local host_problem=""
  checks culprit-host "$dir/attempt0.verdict.json" "$host" >"$dir.host" 2>&1 || host_problem=$(cat "$dir.host")
  [ -z "$host_problem" ] || line="FAIL | ${line#* | } | $host_problem"
  local row="$name: $spec $* -> $line"
  echo "$row" | tee -a "$results"
  if [[ "$line" == FAIL* ]]; then
    failures=$((failures + 1))
    grep "verdict attempt" "$dir.log" >&2 || tail -5 "$dir.log" >&2
  fi
}

for kind in hang skip-collective wrong-count kill; do
  run_case "ddp_flat_$kind" ddp-train backward "$kind"
  run_case "ddp_hier_$kind" ddp-train backward "$kind" --allreduce hierarchical
  run_case "ddp_pipelined_$kind" ddp-train backward "$kind" --allreduce hierarchical --hierarchical-chunk 4096
  run_case "zero3_hier_$kind" fsdp-train forward "$kind" --allreduce hierarchical
done
total=$(wc -l <"$results")
[ "$total" -gt 0 ] || fail "no case ran (ONLY=$ONLY names none)"
checks fault-times "$results"
[ "$failures" -eq 0 ] || fail "$failures of $total cases wrong (rerun one: $0 BIN_DIR WORK_DIR CASE_NAME)"
pass "two-level fault matrix${FAULT_BOX:+ on the box}: $total cases, every verdict names rank $RANK on $host with the flat algorithm's class, phase and step"
