#!/usr/bin/env bash
# Data-parallel scaling on this machine, side by side in one run: ddp-train at 1 and 2 ranks (one
# thread each, foundation configuration: d_model 256, 4 layers, 4 heads, seq_len 256, micro-batch 8;
# global batch 8 per rank, so each rank does the same work) and the PyTorch peer's DDP (gloo) at
# 1 and 2 processes. Each round also runs two *independent* 1-rank jobs at once, one per core: their
# mean throughput over the solo 1-rank run is the co-run ceiling, the E(2) any data-parallel job
# could reach here with free communication (the cores share caches and memory). Prints, per round,
# E(2) = throughput_2 / (2 x throughput_1) for both programs, ours over the ceiling, our exposed
# communication share and communication-thread CPU per step, and our all-reduce bus bandwidth beside
# the MPI library's own all-reduce of the same bytes (the summary's yardstick); then the medians over
# rounds. ROUNDS defaults to 3.
#
# Usage: scripts/bench-ddp.sh [ROUNDS]
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds="${1:-3}"
need_torch_peer
common=("${foundation[@]}" --steps 30)
tp() { json "$1/summary.json" .throughput_tokens_per_s; }
printf '# data-parallel scaling, tokens/s (median step after warm-up); E(2) = tp2 / (2 tp1); ceiling = co-run E(2)\n'
printf '%-6s %8s %8s %6s %8s %6s %7s %8s %8s %7s %7s | %8s %8s %6s\n' round ours_w1 ours_w2 E2 ceiling E2/ceil \
  exposed comm_cpu busbw bare_bw corun peer_w1 peer_w2 peerE2
for r in $(seq 1 "$rounds"); do
  mpirun -np 1 --bind-to core "$build/bin/ddp-train" "${common[@]}" --global-batch 8 --run-dir "$tmp/w1_$r" 2>/dev/null
  taskset -c 0 mpirun -np 1 --bind-to none "$build/bin/ddp-train" "${common[@]}" --global-batch 8 \
    --run-dir "$tmp/c0_$r" >/dev/null 2>&1 &
  taskset -c 1 mpirun -np 1 --bind-to none "$build/bin/ddp-train" "${common[@]}" --global-batch 8 \
    --run-dir "$tmp/c1_$r" >/dev/null 2>&1
  wait
  mpirun -np 2 --bind-to core "$build/bin/ddp-train" "${common[@]}" --global-batch 16 --run-dir "$tmp/w2_$r" \
    --baseline "$tmp/w1_$r/summary.json" 2>/dev/null
  s="$tmp/w2_$r/summary.json"
  p1=$(cd "$tmp" && env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 "$peer" --steps 20 --world 1 |
       jq -er .tokens_per_s)
  p2=$(cd "$tmp" && env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 "$peer" --steps 20 --world 2 |
       jq -er .tokens_per_s)
  t1=$(tp "$tmp/w1_$r") e2=$(json "$s" .scaling_efficiency)
  ceiling=$(calc "($(tp "$tmp/c0_$r") + $(tp "$tmp/c1_$r")) / (2 * $t1)")
  printf '%-6s %8.0f %8.0f %6.3f %8.3f %6.3f %6.2f%% %6.1fms %8.2f %7.2f %7s | %8.0f %8.0f %6.3f\n' "$r" \
    "$t1" "$(tp "$tmp/w2_$r")" "$e2" "$ceiling" "$(calc "$e2 / $ceiling")" \
    "$(json "$s" '100 * .exposed_comm_fraction')" "$(json "$s" '1000 * .per_rank_medians.comm_cpu_s.max')" \
    "$(json "$s" .communication.AllReduce.busbw_GBps)" \
    "$(json "$s" .communication.bare_allreduce_busbw_GBps)" \
    "$(printf '%.0f+%.0f' "$(tp "$tmp/c0_$r")" "$(tp "$tmp/c1_$r")")" \
    "$p1" "$p2" "$(calc "$p2 / (2 * $p1)")" | tee -a "$tmp/rows"
done
figures ddp "$tmp/rows"
echo "# ceiling: (tp of core-0 job + tp of core-1 job) / (2 tp1) for two independent 1-rank jobs run together;"
echo "# exposed: median exposed communication over the median step; comm_cpu: the larger per-rank median CPU"
echo "# time of the communication thread per step; busbw: all-reduce bytes over the time in flight, which"
echo "# includes waiting for the peer rank to reach the same bucket; bare: the MPI library's all-reduce"
echo "# (MPI_Iallreduce, its own communicator) of the whole gradient (3.29M floats) measured after training."
