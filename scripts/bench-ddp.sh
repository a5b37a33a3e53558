#!/usr/bin/env bash
# Data-parallel scaling on this machine, side by side in one run: ddp-train at 1 and 2 ranks (one
# thread each, foundation configuration: d_model 256, 4 layers, 4 heads, seq_len 256, micro-batch 8;
# global batch 8 per rank, so each rank does the same work) and the PyTorch peer's DDP (gloo) at
# 1 and 2 processes. Prints E(2) = throughput_2 / (2 x throughput_1) for both, our exposed
# communication share, and our all-reduce bus bandwidth beside a bare MPI_Allreduce of the same
# bytes. Repeats ROUNDS times (default 2).
#
# Usage: scripts/bench-ddp.sh [ROUNDS]
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-2}"
common=("${foundation[@]}" --steps 30)
printf '# data-parallel scaling, tokens/s (median step after warm-up); E(2) = tp2 / (2 tp1)\n'
printf '%-6s %10s %10s %7s %9s %10s %10s | %10s %10s %7s\n' round ours_w1 ours_w2 E2 exposed% busbw_GBps bare_GBps \
  peer_w1 peer_w2 peerE2
for r in $(seq 1 "$rounds"); do
  mpirun -np 1 --bind-to core "$build/bin/ddp-train" "${common[@]}" --global-batch 8 --run-dir "$tmp/w1_$r" 2>/dev/null
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --global-batch 16 --run-dir "$tmp/w2_$r" \
    --baseline "$tmp/w1_$r/summary.json" 2>/dev/null
  s="$tmp/w2_$r/summary.json"
  p1=$(cd "$tmp" && env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 "$peer" --steps 20 --world 1 |
       python3 -c "import json,sys;print(json.load(sys.stdin)['tokens_per_s'])")
  p2=$(cd "$tmp" && env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 "$peer" --steps 20 --world 2 |
       python3 -c "import json,sys;print(json.load(sys.stdin)['tokens_per_s'])")
  printf '%-6s %10.0f %10.0f %7.3f %8.2f%% %10.2f %10.2f | %10.0f %10.0f %7.3f\n' "$r" \
    "$(json "$tmp/w1_$r/summary.json" "d['throughput_tokens_per_s']")" "$(json "$s" "d['throughput_tokens_per_s']")" \
    "$(json "$s" "d['scaling_efficiency']")" "$(json "$s" "100*d['exposed_comm_fraction']")" \
    "$(json "$s" "d['communication']['AllReduce']['busbw_GBps']")" \
    "$(json "$s" "d['communication']['bare_allreduce_busbw_GBps']")" \
    "$p1" "$p2" "$(python3 -c "print($p2/(2*$p1))")"
done
echo "# busbw: our all-reduce bytes over the time they were in flight, which includes waiting for the"
echo "# peer rank to reach the same bucket during overlapped backward; bare: a blocking MPI_Allreduce of"
echo "# the whole gradient (3.29M floats) measured after training."
