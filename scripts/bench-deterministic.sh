#!/usr/bin/env bash
# Deterministic mode's cost (issue 14): ddp-train at W = 2 in fast mode and with --deterministic,
# side by side, alternating, at the foundation configuration (d_model 256, 4 layers, 4 heads,
# seq_len 256, micro-batch 8, one thread per rank, global batch 16: grad_accum 1), 30 steps each
# (W = 2 only: this machine has 2 cores, so larger W would time-share them). Per round: the median step of each mode, their ratio, and deterministic mode's exposed
# communication and its all-reduce bytes next to fast mode's; then the median ratio over rounds.
# Target: deterministic / fast <= 1.10 (issue 47). With PREVIOUS_BIN=DIR (the bin/ folder of an
# earlier build, e.g. one of main before a change to exact_sum.cpp), each round also runs that
# build's --deterministic, and the rows end with its median step and this build's / its ratio.
#
# MODEL=gpt2-small runs GPT-2 small's shape instead (--model gpt2-small, micro-batch 1, global batch 2:
# grad_accum 1; a synthetic corpus at its vocabulary), STEPS steps each (default 4; 30 at the
# foundation configuration).
#
# Usage: [PREVIOUS_BIN=DIR] [MODEL=gpt2-small] [STEPS=N] scripts/bench-deterministic.sh [ROUNDS]     (default 3)
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-3}"
if use_gpt2_small; then
  common=("${gpt2_small[@]}" --global-batch 2 --steps "${STEPS:-4}")
else
  common=("${foundation[@]}" --steps "${STEPS:-30}" --global-batch 16)
fi
med() { json "$1/summary.json" .median_step_s; }
printf '# W=2 step time, fast vs --deterministic (median step after warm-up, s); configuration: %s\n' "${MODEL:-foundation}"
previous="${PREVIOUS_BIN:-}"
[ -z "$previous" ] || [ -x "$previous/ddp-train" ] || { echo "bench-deterministic.sh: PREVIOUS_BIN=$previous has no ddp-train" >&2; exit 2; }
printf '%-6s %9s %9s %7s %9s %9s %12s %12s' round fast determ ratio exp_fast exp_det bytes_fast bytes_det
[ -z "$previous" ] && echo || printf ' %9s %9s\n' prev_det det/prev
for r in $(seq 1 "$rounds"); do
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --run-dir "$tmp/fast_$r" >/dev/null 2>&1
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --deterministic --run-dir "$tmp/det_$r" >/dev/null 2>&1
  [ -z "$previous" ] ||
    mpirun -np 2 --bind-to core "$previous/ddp-train" "${common[@]}" --deterministic --run-dir "$tmp/prev_$r" >/dev/null 2>&1
  f=$(med "$tmp/fast_$r") d=$(med "$tmp/det_$r")
  {
    printf '%-6s %9.4f %9.4f %7.3f %8.2f%% %8.2f%% %12s %12s' "$r" "$f" "$d" "$(calc "$d / $f")" \
      "$(json "$tmp/fast_$r/summary.json" '100 * .exposed_comm_fraction')" \
      "$(json "$tmp/det_$r/summary.json" '100 * .exposed_comm_fraction')" \
      "$(json "$tmp/fast_$r/summary.json" .communication.total_bytes)" \
      "$(json "$tmp/det_$r/summary.json" .communication.total_bytes)"
    if [ -z "$previous" ]; then echo; else
      p=$(med "$tmp/prev_$r")
      printf ' %9.4f %9.3f\n' "$p" "$(calc "$d / $p")"
    fi
  } | tee -a "$tmp/rows"
done
figures deterministic "$tmp/rows"
echo "# exp_*: exposed communication share of the median step; bytes_*: all bytes the rank-0 communicator"
echo "# moved over the run (the steps plus set-up): deterministic mode sends two int64 lanes per element plus per-chunk digits."
