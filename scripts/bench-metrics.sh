#!/usr/bin/env bash
# Benchmark (not a test): what the live metrics and the TensorBoard event files cost a training
# step (issue 49: within 1%), two ways in one run: per call (bench/metrics_bench.cpp: a step's
# publishing, one scrape; the metrics only), over the measured step, a bound that machine noise
# cannot blur; and end to end, where "on" is --metrics-port with the TensorBoard events (the
# trainers' default) and "off" is neither (--no-tensorboard). Two
# data-parallel ranks train a small model (2 layers, d 64: short steps, so a fixed per-step cost
# shows most; the recorder benchmark's worst case) with --metrics-port (every rank serving, and a
# scraper reading both endpoints every second, as a Prometheus with a 1 s interval would: a
# harsher load than the 15 s of docs/RUNBOOK.md) and without, alternating on/off runs so that the
# machine's drift hits both alike. Each run's figure is the summary's median step; reported as the
# medians and the median of the on/off ratio of each pair.
#
# Usage: scripts/bench-metrics.sh [PAIRS] [STEPS]   (default 5 pairs of 60-step runs)
. "$(dirname "$0")/bench-common.sh"
pairs=${1:-5}
steps=${2:-60}
small=(--data "$here/data/fortunes.h5" --layers 2 --d-model 64 --heads 2 --seq-len 64 --micro-batch 4
       --threads 1 --log-every 1000)
port=$(python3 "$here/tests/scripts/checks.py" free-port-run 2)
for round in $(seq "$pairs"); do
  for mode in on off; do
    dir="$tmp/$round-$mode"
    opts=(--no-tensorboard)  # off: no metrics, no event files
    scraper=""
    if [ "$mode" = on ]; then
      opts=(--metrics-port "$port")  # on: metrics served and scraped, TensorBoard events written (default)
      (while sleep 1; do curl -sf "127.0.0.1:$port/metrics" "127.0.0.1:$((port + 1))/metrics" >/dev/null || true; done) &
      scraper=$!
    fi
    mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${small[@]}" --steps "$steps" --global-batch 16 \
      "${opts[@]}" --run-dir "$dir" >"$dir.log" 2>&1 || { cat "$dir.log" >&2; exit 1; }
    [ -z "$scraper" ] || kill "$scraper"
    printf '%s\t%s\t%s\n' "$round" "$mode" "$(json "$dir/summary.json" .median_step_s)"
  done
done | tee "$tmp/rows.tsv"
SHARDTRAIN_METRICS_BENCH=1 "$build/bench/shardtrain_bench" "[metrics-bench]" | grep -E '^(metrics|tensorboard)_' |
  tee "$tmp/per_call.txt"
echo "load: $(uptime)"
figures metrics "$tmp/rows.tsv" "$tmp/per_call.txt"
