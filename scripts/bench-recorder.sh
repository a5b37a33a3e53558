#!/usr/bin/env bash
# Benchmark (not a test): what the flight recorder and the phase marking cost a training step
# (issue 11: at most 1%), two ways in one run:
#  1. per call: the recorder's cost per recorded collective and set_phase's per phase change
#     (bench/recorder_bench.cpp), times a step's collectives (the summary's communication
#     calls over its steps) and phase changes (data, forward and backward per micro-batch,
#     optimizer, step-end), over the measured median step: a bound that machine noise cannot blur;
#  2. end to end: two data-parallel ranks train the same job with the recorder on
#     (--flight-entries 2048, the default) and off (--flight-entries 0: no entries, no phase
#     history), alternating on/off runs so that the machine's drift hits both alike; each run's
#     figure is its median step after warm-up, reported as the median over runs and the median of
#     the on/off ratio of each pair.
# Two configurations: the foundation model (the benchmark size of docs/PERFORMANCE.md), and a small
# model with 64 KB buckets, many collectives per step (the recorder's worst case: its cost is per
# collective and per phase change, not per FLOP).
#
# Usage: scripts/bench-recorder.sh [ROUNDS]   (default 5 on/off pairs of the foundation model, 3x as many small)
. "$(dirname "$0")/bench-common.sh"
rounds=${1:-5}
small=(--data "$here/data/fortunes.h5" --layers 2 --d-model 64 --heads 2 --seq-len 64 --micro-batch 4
       --threads 1 --log-every 1000 --bucket-mb 0.0625)

# run_pair NAME STEPS GLOBAL_BATCH OPTIONS...: rounds x (on, off), prints one row per run.
run_pair() {
  local name=$1 steps=$2 batch=$3; shift 3
  for round in $(seq "$rounds"); do
    for entries in 2048 0; do
      local dir="$tmp/$name-$round-$entries"
      mpirun -np 2 --bind-to core "$build/bin/ddp-train" "$@" --steps "$steps" --global-batch "$batch" \
        --flight-entries "$entries" --run-dir "$dir" >"$dir.log" 2>&1 || { cat "$dir.log" >&2; exit 1; }
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "$entries" "$(json "$dir/summary.json" .median_step_s)" \
        "$(json "$dir/summary.json" '([.communication[] | objects | select(has("calls")) | .calls] | add) / .steps')" \
        "$(json "$dir/summary.json" .config.grad_accum)"
    done
  done
}

SHARDTRAIN_RECORDER_BENCH=1 "$build/bench/shardtrain_bench" "[recorder-bench]" | grep _ns_ | tee "$tmp/per_call.txt"
{
  run_pair foundation 12 32 "${foundation[@]}"
  rounds=$((3 * rounds)) run_pair small-buckets 60 16 "${small[@]}"  # short runs: three times the pairs
} | tee "$tmp/rows.tsv"

figures recorder "$tmp/rows.tsv" "$tmp/per_call.txt"
