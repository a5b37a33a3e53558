#!/usr/bin/env bash
# One-rank throughput side by side with the PyTorch peer (bench/torch_peer.py) at the foundation
# benchmark configuration: d_model 256, 4 layers, 4 heads, seq_len 256, micro-batch 8, vocab 256,
# one thread, every program pinned to the same core, in one run (the machine is noisy, so the
# ratios are the figures that count). The peer is PyTorch 2.x from PyPI, as users install it, in the
# cached environment of scripts/python-env.sh peer (made on the first run), twice per round:
# eager with scaled_dot_product_attention, and the same under torch.compile. Each of ROUNDS
# (default 5) rounds runs the three, ours first in odd rounds and last in even ones, so a drift of
# the machine's load does not favour one side; the medians of the rounds close the table.
#
# MODEL=gpt2-small runs both at GPT-2 small's shape instead (12 layers, d_model 768, 12 heads, context
# 1024, vocabulary 50,257, micro-batch 1; ours on a synthetic corpus at that vocabulary, the peer on
# random tokens of it), STEPS steps each (default 6 there, 20 at the foundation configuration).
#
# Usage: [MODEL=gpt2-small] [STEPS=N] scripts/bench-peer.sh [ROUNDS]
# Columns: tokens/s (median step after warm-up) of shardtrain, of the eager peer and of the compiled
# peer; the ratios; our MFU (over the 1024^3 peak of the chosen GEMM library) and our MFU over the
# chosen library's measured rate at the model's own shapes (the summary's gemm); the library chosen.
# Needs: a build (scripts/setup.sh) and PyPI for the first run (python-env.sh peer; g++ and Python's
# headers for torch.compile's C++ kernels, both there after setup.sh and python-env.sh).
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-5}"
[ -f "$peer" ] || { echo "bench-peer.sh: the PyTorch peer $peer is missing; set PEER=path/to/a/peer.py" >&2; exit 2; }
peer_py="$("$here/scripts/python-env.sh" peer)" ||
  { echo "bench-peer.sh: no PyTorch 2.x environment for the peer (python-env.sh peer said why above)" >&2; exit 2; }
core=0
processor="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
isa="$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo AVX2)"
torch_version="$("$peer_py" -c 'import torch; print(torch.__version__)')"
if use_gpt2_small; then
  steps="${STEPS:-6}"
  ours_args=("${gpt2_small[@]}" --global-batch 1)
  peer_args=(--layers 12 --d 768 --heads 12 --seq 1024 --micro 1 --vocab 50257 --threads 1 --sdpa 1)
else
  steps="${STEPS:-20}"
  ours_args=("${foundation[@]}" --global-batch 8)
  peer_args=(--layers 4 --d 256 --heads 4 --seq 256 --micro 8 --threads 1 --sdpa 1)
fi
peer_args+=(--steps "$steps")

# SHARDTRAIN_GEMM_CACHE=off: every run of ours measures the GEMM libraries afresh, so "MFU at the
# model's shapes" is over a rate measured in the same minute as the run (a cached rate from a
# start-up on a busier or quieter machine would be the wrong denominator).
ours() {  # round -> "tokens/s mfu mfu_at_shapes library"
  SHARDTRAIN_GEMM_CACHE=off taskset -c "$core" "$build/bin/ddp-train" "${ours_args[@]}" --steps "$steps" \
    --run-dir "$tmp/run$1" >/dev/null 2>&1
  json "$tmp/run$1/summary.json" '"\(.throughput_tokens_per_s) \(.mfu) \(if .gemm.model_shapes_flops_per_s then
    .throughput_tokens_per_s * .flops_per_token / .gemm.model_shapes_flops_per_s else 0 end) \(.gemm.library)"'
}
theirs() {  # compile 0|1 -> tokens/s
  (cd "$tmp" && taskset -c "$core" "$peer_py" "$peer" "${peer_args[@]}" --compile "$1" 2>"$tmp/peer.err" |
    python3 -c "import json,sys;print(json.load(sys.stdin)['tokens_per_s'])") ||
    { echo "bench-peer.sh: the peer failed:" >&2; tail -5 "$tmp/peer.err" >&2; exit 1; }
}

printf '# one-rank training throughput, tokens/s (median step after warm-up), all on core %s of %s (%s, %s CPUs)\n' \
  "$core" "$processor" "$isa" "$(nproc)"
printf '# configuration: %s, %s steps each\n' "${MODEL:-foundation}" "$steps"
printf '# peer: PyTorch %s eager + scaled_dot_product_attention, and the same under torch.compile; load average at start: %s\n' \
  "$torch_version" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %11s %11s %11s %9s %9s %7s %10s %s\n' round shardtrain eager+sdpa compile x_eager x_compile mfu mfu_shapes gemm
: >"$tmp/rows"
for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then
    read -r tok mfu mfu_shapes lib < <(ours "$r"); eager=$(theirs 0); compiled=$(theirs 1)
  else
    eager=$(theirs 0); compiled=$(theirs 1); read -r tok mfu mfu_shapes lib < <(ours "$r")
  fi
  row=$(python3 -c "
t, e, c, m, ms = $tok, $eager, $compiled, $mfu, $mfu_shapes
print('%-6s %11.0f %11.0f %11.0f %9.2f %9.2f %6.1f%% %9.1f%% %s' % ('$r', t, e, c, t / e, t / c, 100 * m, 100 * ms, '$lib'))")
  echo "$row"
  echo "$tok $eager $compiled $mfu $mfu_shapes" >>"$tmp/rows"
done
python3 - "$tmp/rows" <<'EOF'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
t, e, c, m, ms = (med([r[i] for r in rows]) for i in range(5))
print('%-6s %11.0f %11.0f %11.0f %9.2f %9.2f %6.1f%% %9.1f%%' % (
    'median', t, e, c, med([r[0] / r[1] for r in rows]), med([r[0] / r[2] for r in rows]), 100 * m, 100 * ms))
EOF
printf '# load average at the end: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
