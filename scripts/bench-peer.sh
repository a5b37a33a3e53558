#!/usr/bin/env bash
# One-rank throughput side by side with the PyTorch peer (bench/torch_peer.py), at the
# foundation benchmark configuration: d_model 256, 4 layers, 4 heads, seq_len 256, micro-batch 8,
# vocab 256, one thread, both pinned to the same core, in one run (the machine is noisy, so the
# ratio of the two is the figure that counts). Repeats the pair ROUNDS times (default 3).
#
# Usage: scripts/bench-peer.sh [ROUNDS]
# Needs: a build (scripts/setup.sh), python3-torch and an optimised BLAS for the peer
# (installed here when missing, as root). The peer runs with OPENBLAS_CORETYPE=SkylakeX, its best
# configuration per its docstring (Debian's OpenBLAS misdetects this processor).
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-3}"
need_torch_peer
core=0
printf '# one-rank training throughput, tokens/s (median step after warm-up), core %s\n' "$core"
printf '%-6s %14s %14s %8s %8s %8s\n' round shardtrain torch_peer ratio mfu data%
for r in $(seq 1 "$rounds"); do
  taskset -c "$core" "$build/bin/ddp-train" "${foundation[@]}" --global-batch 8 --steps 20 --run-dir "$tmp/run$r" \
    2>/dev/null
  ours=$(python3 -c "import json;print(json.load(open('$tmp/run$r/summary.json'))['throughput_tokens_per_s'])")
  mfu=$(python3 -c "import json;print(json.load(open('$tmp/run$r/summary.json'))['mfu'])")
  data_pct=$(python3 -c "import json;s=json.load(open('$tmp/run$r/summary.json'));print(100*s['per_rank_medians']['data_s']['median']/s['median_step_s'])")
  theirs=$(cd "$tmp" && env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX taskset -c "$core" /usr/bin/python3 "$peer" \
    --layers 4 --d 256 --heads 4 --seq 256 --micro 8 --steps 20 --threads 1 |
    python3 -c "import json,sys;print(json.load(sys.stdin)['tokens_per_s'])")
  printf '%-6s %14.0f %14.0f %8.2f %7.1f%% %7.3f%%\n' "$r" "$ours" "$theirs" "$(python3 -c "print($ours/$theirs)")" \
    "$(python3 -c "print(100*$mfu)")" "$data_pct"
done
