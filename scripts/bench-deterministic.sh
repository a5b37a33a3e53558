#!/usr/bin/env bash
# Deterministic mode's cost (issue 14): ddp-train at W = 2 in fast mode and with --deterministic,
# side by side, alternating, at the foundation configuration (d_model 256, 4 layers, 4 heads,
# seq_len 256, micro-batch 8, one thread per rank, global batch 16: grad_accum 1), 30 steps each
# (W = 2 only: this machine has 2 cores, so larger W would time-share them). Per round: the median step of each mode, their ratio, and deterministic mode's exposed
# communication and its all-reduce bytes next to fast mode's; then the median ratio over rounds.
# Target: deterministic / fast <= 1.15.
#
# Usage: scripts/bench-deterministic.sh [ROUNDS]     (default 3)
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-3}"
common=("${foundation[@]}" --steps 30 --global-batch 16)
med() { json "$1/summary.json" .median_step_s; }
printf '# W=2 step time, fast vs --deterministic (median step after warm-up, s)\n'
printf '%-6s %9s %9s %7s %9s %9s %12s %12s\n' round fast determ ratio exp_fast exp_det bytes_fast bytes_det
for r in $(seq 1 "$rounds"); do
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --run-dir "$tmp/fast_$r" >/dev/null 2>&1
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --deterministic --run-dir "$tmp/det_$r" >/dev/null 2>&1
  f=$(med "$tmp/fast_$r") d=$(med "$tmp/det_$r")
  printf '%-6s %9.4f %9.4f %7.3f %8.2f%% %8.2f%% %12s %12s\n' "$r" "$f" "$d" "$(calc "$d / $f")" \
    "$(json "$tmp/fast_$r/summary.json" '100 * .exposed_comm_fraction')" \
    "$(json "$tmp/det_$r/summary.json" '100 * .exposed_comm_fraction')" \
    "$(json "$tmp/fast_$r/summary.json" .communication.total_bytes)" \
    "$(json "$tmp/det_$r/summary.json" .communication.total_bytes)" | tee -a "$tmp/rows"
done
figures deterministic "$tmp/rows"
echo "# exp_*: exposed communication share of the median step; bytes_*: all bytes the rank-0 communicator"
echo "# moved over the run (30 steps plus set-up): deterministic mode sends 64-bit words plus per-chunk grids."
