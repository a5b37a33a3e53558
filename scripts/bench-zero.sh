#!/usr/bin/env bash
# ZeRO throughput beside DDP on this machine, side by side in one run: ddp-train and fsdp-train
# --zero-stage 1, 2, 3 at W = 2 ranks (one thread each, foundation configuration: d_model 256,
# 4 layers, 4 heads, seq_len 256, micro-batch 8, global batch 16, fast mode). Prints tokens/s, the
# ratio to DDP, per-rank exposed communication (median comm_exposed_s of each rank's step log),
# and rank 0's measured peak model-state bytes. Repeats ROUNDS times (default 2).
#
# MODEL=gpt2-small runs GPT-2 small's shape instead (--model gpt2-small, micro-batch 1, global batch 2),
# STEPS steps each (default 4; 30 at the foundation configuration).
#
# Usage: [MODEL=gpt2-small] [STEPS=N] scripts/bench-zero.sh [ROUNDS]
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-2}"
if use_gpt2_small; then
  common=("${gpt2_small[@]}" --global-batch 2 --steps "${STEPS:-4}")
else
  common=("${foundation[@]}" --global-batch 16 --steps "${STEPS:-30}")
fi
printf '# W=2, tokens/s (median step after warm-up); ratio = tp / tp_DDP; exposed = median comm_exposed_s per rank\n'
printf '%-6s %-6s %10s %7s %18s %14s\n' round layout tok_s ratio exposed_s_r0/r1 model_state_MB
for r in $(seq 1 "$rounds"); do
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --run-dir "$tmp/ddp_$r" >/dev/null 2>&1
  base=$(json "$tmp/ddp_$r/summary.json" .throughput_tokens_per_s)
  for layout in ddp z1 z2 z3; do
    if [ "$layout" != ddp ]; then
      mpirun -np 2 --bind-to core "$build/bin/fsdp-train" "${common[@]}" --zero-stage "${layout#z}" \
        --run-dir "$tmp/${layout}_$r" >/dev/null 2>&1
    fi
    s="$tmp/${layout}_$r/summary.json"
    t=$(json "$s" .throughput_tokens_per_s)
    # shellcheck disable=SC2046  # one printf argument per rank's number
    exposed=$(printf '%.4f/' $(json "$s" '.per_rank_medians.comm_exposed_s.by_rank[]'))
    printf '%-6s %-6s %10.0f %7.3f %18s %14.1f\n' "$r" "$layout" "$t" "$(calc "$t / $base")" "${exposed%/}" \
      "$(json "$s" '.memory_bytes_rank0.model_state / 1e6')"
  done
done
