#!/usr/bin/env bash
# Lost-node restart against a same-W restart, side by side in one run (issue 14): a ~100M-parameter
# decoder (d_model 768, 12 layers; parameters + two AdamW moments = 1.03 GB fp32) trained by
# ddp-train on NP ranks under scripts/run-resilient.sh, a checkpoint every 2 steps, rank 1 SIGKILLed
# once step 2 is logged. Alternating rounds of
#   same-W     the restart relaunches NP ranks (what run-resilient.sh did before elastic restarts);
#   lost node  --min-ranks 1 --capacity-cmd "echo NP-1": the restart runs on the largest world size
#              below NP that divides the global batch (grad_accum absorbs the difference) and each
#              rank reads its pieces from the NP-rank checkpoint's files.
# Per restart it prints restart_s (restarts.json: relaunch to the first completed resumed step) and
# its two parts: the first resumed step's own step_s, and the rest (MPI start-up, validating the
# checkpoint's SHA-256s, reading the state, building the model) = "to ready". Medians and the ratio
# lost/same for both. On a machine with fewer cores than ranks the first step at NP-1 ranks does
# NP/(NP-1) times the work per rank (and no more cores), so restart_s mixes restart overhead with
# compute; "to ready" is the restart overhead alone.
#
# Usage: [ROUNDS=3] [SEQ=64] [BUILD_DIR=build] scripts/bench-restart-elastic.sh [NP]   (default NP 3)
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
np="${1:-3}"
((np >= 2)) || { echo "bench-restart-elastic: NP must be at least 2 (a node is lost from it)" >&2; exit 2; }
rounds="${ROUNDS:-3}" seq="${SEQ:-64}"
global_batch=$((np * (np - 1)))  # divisible by NP and NP-1
# run_once MODE DIR: one killed-and-restarted run; prints "restart_s first_step_s old_w new_w".
run_once() {
  local mode=$1 dir=$2
  local elastic=()
  [ "$mode" = lost ] && elastic=(--min-ranks 1 --capacity-cmd "echo $((np - 1))")
  kill_after_step "$dir/run/steps.rank1.jsonl" 2 &
  local watcher=$!
  "$here/scripts/run-resilient.sh" --max-restarts 1 --backoff 0 --log "$dir/restarts.json" "${elastic[@]}" -- \
    mpirun -np "$np" "$build/bin/ddp-train" --data "$here/data/fortunes.h5" --d-model 768 --layers 12 --heads 12 \
    --seq-len "$seq" --micro-batch 1 --global-batch "$global_batch" --steps 5 --ckpt-every 2 --keep 2 \
    --peak-gflops 200 --threads 1 --log-every 1000 --run-dir "$dir/run" >"$dir/out.log" 2>&1 ||
    { cat "$dir/out.log" >&2; exit 1; }
  wait "$watcher" || true
  figures restart-row "$dir/restarts.json" "$dir/run/steps.rank0.jsonl" "$np"
}
rows=()
for i in $(seq 1 "$rounds"); do
  for mode in same lost; do
    mkdir -p "$tmp/$mode$i"
    rows+=("$mode $(run_once "$mode" "$tmp/$mode$i")")
    rm -rf "$tmp/$mode$i/run/checkpoints"
  done
done
figures restart-elastic "$np" "$seq" "$global_batch" "${rows[@]}"
