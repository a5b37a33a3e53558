#!/usr/bin/env bash
# What the header agreement costs (comm/transport.hpp, "Agreement": every operation's seq, op,
# dtype, count and root exchanged with every peer before its data moves): ddp-train with the check
# and with SHARDTRAIN_NO_AGREEMENT_CHECK=1, in alternating rounds, side by side. Two
# configurations: the foundation model (d_model 256, 4 layers, seq_len 256, micro-batch 8) at W=2,
# fast mode, where a step is tens of milliseconds; and a tiny model (2 layers, d_model 32, seq_len
# 32, micro-batch 2) at W=4, deterministic (its exact sums issue the most operations per step),
# where a step is about a millisecond: the worst case relative to the step. Prints the median step
# per round and configuration and the medians' ratio (on / off - 1: the cost as a share of the
# step); the order within a round alternates so that neither side always runs first.
#
# Usage: scripts/bench-agreement.sh [ROUNDS]   (default 5)
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-5}"
big=("${foundation[@]}" --steps 40 --global-batch 16)
tiny=(--data "$here/data/fortunes.h5" --layers 2 --d-model 32 --heads 2 --seq-len 32 --micro-batch 2
      --global-batch 8 --steps 300 --threads 1 --log-every 1000 --deterministic)
run() {  # run NAME on|off NP ARGS...: the median step (ms) of one job
  local name=$1 check=$2 np=$3; shift 3
  local d="$tmp/$name-$check"
  rm -rf "$d"
  if [ "$check" = off ]; then
    SHARDTRAIN_NO_AGREEMENT_CHECK=1 mpirun -np "$np" -x SHARDTRAIN_NO_AGREEMENT_CHECK "$build/bin/ddp-train" "$@" --run-dir "$d" >/dev/null 2>&1
  else
    mpirun -np "$np" "$build/bin/ddp-train" "$@" --run-dir "$d" >/dev/null 2>&1
  fi
  json "$d/summary.json" '.median_step_s * 1000'
}
printf '# median step (ms) with the header agreement (on) and without it (off)\n'
printf '%-6s %12s %12s %12s %12s\n' round big_W2_on big_W2_off tiny_W4_on tiny_W4_off
for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then order="on off"; else order="off on"; fi
  declare -A t=()
  for c in $order; do t[big-$c]=$(run big "$c" 2 "${big[@]}"); done
  for c in $order; do t[tiny-$c]=$(run tiny "$c" 4 "${tiny[@]}"); done
  printf '%-6s %12.3f %12.3f %12.3f %12.3f\n' "$r" "${t[big-on]}" "${t[big-off]}" "${t[tiny-on]}" "${t[tiny-off]}" |
    tee -a "$tmp/rows"
  unset t
done
figures agreement "$tmp/rows"
