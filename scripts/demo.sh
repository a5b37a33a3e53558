#!/usr/bin/env bash
# The main job end to end on a fresh Debian machine: install what is missing, build (Release),
# prepare the bundled data, then train the decoder on real English text (the fortunes corpus)
# for about a minute on one rank, printing a line per 20 steps and a closing summary.
#
# Usage: scripts/demo.sh [extra ddp-train options, e.g. --steps 50]
# Output: run/demo/ (steps.rank0.jsonl step log, summary.json).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build="${BUILD_DIR:-$here/build}"
data="${DATA_DIR:-$here/data}"
run_dir="$here/run/demo"
rm -rf "$run_dir"

echo "demo.sh: training a 3.3M-parameter decoder (4 layers, d_model 256, seq_len 256) on the"
echo "demo.sh: fortunes corpus, documents available by 2019-01-01; later ones are the hold-out."
mpirun -np 1 "$build/bin/ddp-train" \
  --data "$data/fortunes.h5" --cutoff 2019-01-01T00:00:00Z \
  --layers 4 --d-model 256 --heads 4 --seq-len 256 \
  --global-batch 8 --micro-batch 8 --steps 240 --lr 2e-3 --warmup 20 \
  --eval-every 80 --eval-samples 128 --log-every 20 --run-dir "$run_dir" "$@"
echo "demo.sh: done; step log and summary in $run_dir"
