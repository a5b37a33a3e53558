#!/usr/bin/env bash
# Tensor parallelism on this machine, side by side in one run (issue 13):
#  (1) throughput at W = 2, foundation configuration (d_model 256, 4 layers, 4 heads, seq_len 256,
#      micro-batch 8, one thread per rank, global batch 16): (DP=2, TP=1) against (DP=1, TP=2),
#      alternating per round, with the TP group's collective time and its exposed share of the step;
#  (2) memory: a wider model (d_model 512, 4 layers, 8 heads) under a --memory-budget that ZeRO-1 at
#      W = 2 exceeds and that both TP=2 (ZeRO-1 over DP = 1: the whole local state) and ZeRO-3 fit (the budget is set from the tools' own
#      refusals: 2% above the larger of the two estimates); both trained under it at W = 2, their
#      throughput and per-rank peak bytes (the strategies' memory reports) side by side.
# Prints one row per round and the medians. ROUNDS defaults to 3; PART=1 or PART=2 runs one part.
#
# MODEL=gpt2-small runs part (1) at GPT-2 small's shape (micro-batch 1, global batch 2, STEPS steps, default 4).
#
# Usage: [PART=1|2] [MODEL=gpt2-small] [STEPS=N] scripts/bench-tp.sh [ROUNDS]
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-3}"
if use_gpt2_small; then  # MODEL=gpt2-small: part (1) at GPT-2 small's shape, global batch 2, STEPS (default 4)
  common=("${gpt2_small[@]}" --steps "${STEPS:-4}" --global-batch 2)
else
  common=("${foundation[@]}" --steps "${STEPS:-30}" --global-batch 16)
fi
tps() { json "$1/summary.json" .throughput_tokens_per_s; }
med_ms() { json "$1/summary.json" "1000 * .per_rank_medians.$2.max"; }  # med_ms RUN COLUMN: the larger rank median, ms
peak() {  # the largest per-rank total of the memory report, bytes
  json "$1/summary.json" '[.memory_bytes_by_rank[] | [.model_state, .gathered, .communication, .activations | . // 0] | add] | max'
}
if [ "${PART:-all}" != 2 ]; then
printf '# (1) %s configuration, W = 2: tokens/s (median step after warm-up)\n' "${MODEL:-foundation}"
printf '%-6s %10s %10s %7s %9s %9s %8s\n' round dp2_tp1 dp1_tp2 ratio tp_comm tp_exp step
for r in $(seq 1 "$rounds"); do
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --run-dir "$tmp/dp_$r" >/dev/null 2>&1
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --tp 2 --run-dir "$tmp/tp_$r" >/dev/null 2>&1
  a=$(tps "$tmp/dp_$r") b=$(tps "$tmp/tp_$r")
  printf '%-6s %10.0f %10.0f %7.3f %7.1fms %7.1fms %6.0fms\n' "$r" "$a" "$b" "$(calc "$b / $a")" \
    "$(med_ms "$tmp/tp_$r" tp_comm_s)" "$(med_ms "$tmp/tp_$r" tp_exposed_s)" "$(med_ms "$tmp/tp_$r" step_s)" | tee -a "$tmp/rows"
done
figures tp "$tmp/rows"
fi
[ "${PART:-all}" != 1 ] || exit 0

wide=(--data "$here/data/fortunes.h5" --layers 4 --d-model 512 --heads 8 --seq-len 256 --micro-batch 4
      --threads 1 --log-every 1000 --steps 12 --global-batch 8)
need() {  # need [options]: the bytes per rank fsdp-train's --memory-budget refusal names
  mpirun -np 2 "$build/bin/fsdp-train" "${wide[@]}" "$@" --memory-budget 1 --run-dir "$tmp/probe" 2>&1 |
    grep -o 'needs [0-9]* bytes' | head -1 | grep -o '[0-9]*' || true  # the refusal exits 2 by design
}
# (--memory-budget is fsdp-train's. The TP side runs ZeRO-1 over its single DP rank, which keeps the
# whole local state like DDP, tracked by the same allocator as ZeRO-3's; the reference that must NOT
# fit is ZeRO-1 without TP at W = 2.)
ddp=$(need --zero-stage 1) tp2=$(need --zero-stage 1 --tp 2) z3=$(need --zero-stage 3)
[ -n "$ddp" ] && [ -n "$tp2" ] && [ -n "$z3" ] || { echo "bench-tp.sh: a --memory-budget probe named no bytes" >&2; exit 1; }
budget=$(( (tp2 > z3 ? tp2 : z3) * 102 / 100 ))  # 2% above the larger estimate, whole bytes
printf '\n# (2) d_model 512, 4 layers, 8 heads, W = 2, --memory-budget %s bytes (estimates: ZeRO-1 %s, ZeRO-1 x TP=2 %s, ZeRO-3 %s)\n' \
  "$budget" "$ddp" "$tp2" "$z3"
[ "$ddp" -gt "$budget" ] || echo "note: ZeRO-1 without TP fits this budget too (the model is too small for the comparison)"
printf '%-6s %10s %12s %10s %12s\n' round tp2_tok/s tp2_peak z3_tok/s z3_peak
for r in $(seq 1 "$rounds"); do
  mpirun -np 2 --bind-to core "$build/bin/fsdp-train" "${wide[@]}" --zero-stage 1 --tp 2 --memory-budget "$budget" \
    --run-dir "$tmp/wtp_$r" >/dev/null 2>&1
  mpirun -np 2 --bind-to core "$build/bin/fsdp-train" "${wide[@]}" --zero-stage 3 --memory-budget "$budget" \
    --run-dir "$tmp/wz3_$r" >/dev/null 2>&1
  printf '%-6s %10.0f %12.0f %10.0f %12.0f\n' "$r" "$(tps "$tmp/wtp_$r")" "$(peak "$tmp/wtp_$r")" \
    "$(tps "$tmp/wz3_$r")" "$(peak "$tmp/wz3_$r")"
done
echo "# tp_comm / tp_exp: the larger per-rank median of the TP group's collective time in flight and of the"
echo "# time the compute thread waited on it, per step; peak: the largest per-rank sum of the memory report's"
echo "# model state, gathered, communication and activation bytes (DDP's is exact by construction: its buffers)."
