#!/usr/bin/env bash
# Benchmark (not a test): what the flight recorder and the phase marking cost a training step
# (issue 11: at most 1%). Two data-parallel ranks train the same job with the recorder on
# (--flight-entries 2048, the default) and off (--flight-entries 0: no entries, no phase history),
# alternating on/off runs so that the machine's drift hits both alike; each run's figure is its
# median step time after warm-up (summary.json), and the result is the median over runs of each,
# and their ratio. Two configurations: the foundation model (the benchmark size of
# docs/PERFORMANCE.md), and a small model with 64 KB buckets, many collectives per step (the
# recorder's worst case: its cost is per collective and per phase change, not per FLOP).
#
# Usage: scripts/bench-recorder.sh [ROUNDS]   (default 5 on/off pairs per configuration)
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
      printf '%s\t%s\t%s\t%s\n' "$name" "$round" "$entries" "$(json "$dir/summary.json" "d['median_step_s']")"
    done
  done
}

{
  run_pair foundation 12 32 "${foundation[@]}"
  run_pair small-buckets 60 16 "${small[@]}"
} | tee "$tmp/rows.tsv"

python3 - "$tmp/rows.tsv" <<'PY'
import statistics as st, sys
rows = [line.split("\t") for line in open(sys.argv[1]).read().split("\n") if line]
print("# configuration: median step with the recorder on / off (ms), cost = on/off - 1")
for name in dict.fromkeys(r[0] for r in rows):
    on = st.median(float(r[3]) for r in rows if r[0] == name and r[2] == "2048")
    off = st.median(float(r[3]) for r in rows if r[0] == name and r[2] == "0")
    print(f"{name}: on {1e3 * on:.2f} ms, off {1e3 * off:.2f} ms, cost {100 * (on / off - 1):+.2f}%")
PY
