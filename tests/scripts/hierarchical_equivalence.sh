#!/usr/bin/env bash
# Hierarchical collectives (issue 35) end to end on one machine, the nodes pretended with
# SHARDTRAIN_NODE_OF_RANK (libcore/include/shardtrain/comm/hierarchical.hpp):
#   * deterministic ddp-train --allreduce hierarchical on 2 nodes x 2 ranks and on 3 + 1 ranks is
#     BITWISE equal to W = 1 (parameters and step log), and so are fsdp-train ZeRO-2 on 2 x 2 and
#     ZeRO-3 on interleaved 2 x 2 (their reduce-scatters and all-gathers go hierarchical too);
#   * pipelined in chunks (--hierarchical-chunk) on 2 x 2: BITWISE W = 1 too, the same bytes in more
#     node-level calls;
#   * the run says it is hierarchical, and its summary splits the communication into the node-local
#     and cross-node groups;
#   * fast mode 2 x 2 hierarchical stays within atol 1e-6 + rtol 1e-4 of fast flat W = 4 (fp32 sums in
#     another order);
#   * on one node --allreduce hierarchical is the flat path (said so in the log);
#   * --allreduce auto --step-model: each all-reduce goes hierarchical from the size the model's two
#     links price cheaper (the log and the summary say which), bitwise W = 1 all the same;
#   * a stage skipped by fault injection is named by hang-diagnose (rank, group, seq, step, phase);
#   * an override that does not name one label per rank exits 2 naming the variable.
# Usage: hierarchical_equivalence.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
model=(--seq-len 32 --layers 2 --heads 2 --d-model 16 --steps 6 --global-batch 8 --micro-batch 1 --bucket-mb 0.004)
# run NP DIR TOOL [options...]
run() {
  local np=$1 dir=$2 tool=$3; shift 3
  mpirun -np "$np" --oversubscribe -x SHARDTRAIN_NODE_OF_RANK "$BIN_DIR/$tool" --data "$DATA" "${model[@]}" \
    --peak-gflops 100 --log-every 1000 --run-dir "$dir" "$@" >"$dir.log" 2>&1 || { local rc=$?; cat "$dir.log" >&2; return $rc; }
}
export SHARDTRAIN_NODE_OF_RANK=a
run 1 "$WORK/ref" ddp-train --deterministic

for layout in a,a,b,b a,a,a,b; do
  export SHARDTRAIN_NODE_OF_RANK=$layout
  dir="$WORK/ddp_${layout//,/}"
  run 4 "$dir" ddp-train --deterministic --allreduce hierarchical
  grep -q "allreduce: hierarchical over 2 nodes" "$dir.log" || { cat "$dir.log" >&2; fail "$dir: not hierarchical"; }
  expect_verdict BITWISE "$WORK/ref/params.h5" "$dir/params.h5"
  expect_verdict BITWISE "$WORK/ref/steps.rank0.jsonl" "$dir/steps.rank0.jsonl"
  python3 - "$dir/summary.json" <<'PY' || fail "$dir: the summary does not split intra- and inter-node communication"
import json, sys
c = json.load(open(sys.argv[1]))["communication"]
assert c["allreduce_algorithm"] == "hierarchical", c["allreduce_algorithm"]
levels = c["levels"]
assert any(l["inter_node"] for l in levels.values()) and any(not l["inter_node"] for l in levels.values()), levels.keys()
assert c["inter_node_busy_s"] > 0 and c["intra_node_busy_s"] > 0
print("  levels:", ", ".join(f"{n} ({'inter' if l['inter_node'] else 'intra'}-node, {l['total_busy_s']:.4f} s)" for n, l in levels.items()))
PY
  pass "deterministic ddp-train, nodes $layout, --allreduce hierarchical: bitwise equal to W=1"
done

# Pipelined (--hierarchical-chunk): each all-reduce cut into chunks through the levels; the same
# exact sums, so still bitwise W = 1, and the node groups did the same bytes in more calls.
export SHARDTRAIN_NODE_OF_RANK=a,a,b,b
run 4 "$WORK/pipelined" ddp-train --deterministic --allreduce hierarchical --hierarchical-chunk 1024
expect_verdict BITWISE "$WORK/ref/params.h5" "$WORK/pipelined/params.h5"
expect_verdict BITWISE "$WORK/ref/steps.rank0.jsonl" "$WORK/pipelined/steps.rank0.jsonl"
rs() { jq -r ".communication.levels[\"dp.node\"].ReduceScatter.$2" "$1/summary.json"; }
echo "  node reduce-scatters: one piece $(rs "$WORK/ddp_aabb" calls) calls, $(rs "$WORK/ddp_aabb" bytes) bytes; pipelined $(rs "$WORK/pipelined" calls) calls, $(rs "$WORK/pipelined" bytes) bytes"
[ "$(rs "$WORK/pipelined" bytes)" = "$(rs "$WORK/ddp_aabb" bytes)" ] && (($(rs "$WORK/pipelined" calls) > $(rs "$WORK/ddp_aabb" calls))) ||
  fail "the pipelined run should move the same bytes inside the node in more calls"
expect_exit2 "--hierarchical-chunk pipelines the hierarchical all-reduce only" \
  mpirun -np 1 "$BIN_DIR/ddp-train" --data "$DATA" "${model[@]}" --hierarchical-chunk 1024 --run-dir "$WORK/bad_chunk"
pass "deterministic ddp-train 2 x 2, --hierarchical-chunk 1024 (pipelined chunks): bitwise equal to W=1; refused on a flat run"

run 4 "$WORK/zero2" fsdp-train --zero-stage 2 --deterministic --allreduce hierarchical
expect_verdict BITWISE "$WORK/ref/params.h5" "$WORK/zero2/params.h5"
expect_verdict BITWISE "$WORK/ref/steps.rank0.jsonl" "$WORK/zero2/steps.rank0.jsonl"
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['communication']; assert c['levels']['dp.node']['ReduceScatter']['calls'] > 0" \
  "$WORK/zero2/summary.json" || fail "ZeRO-2 hierarchical: no node-local reduce-scatter"
pass "deterministic fsdp-train ZeRO-2, nodes a,a,b,b, --allreduce hierarchical: bitwise equal to W=1"

# ZeRO-3 (parameters gathered two levels before every forward and backward) on interleaved nodes.
export SHARDTRAIN_NODE_OF_RANK=a,b,a,b
run 4 "$WORK/zero3" fsdp-train --zero-stage 3 --deterministic --allreduce hierarchical
expect_verdict BITWISE "$WORK/ref/params.h5" "$WORK/zero3/params.h5"
pass "deterministic fsdp-train ZeRO-3, nodes a,b,a,b, --allreduce hierarchical: bitwise equal to W=1"
export SHARDTRAIN_NODE_OF_RANK=a,a,b,b

# --allreduce auto with a step model: the model's two links decide per size. Links chosen so that
# the lines cross at 2223 bytes on 2 x 2 (flat 1.5e-8 b + 6e-5 s, two levels 6e-9 b + 8e-5 s, as in
# test_step_model_predict's worked case): the 4 KiB gradient buckets go hierarchical, the small loss and
# norm sums stay flat, and the result is still bitwise W = 1's. A model whose flat path is faster per
# byte keeps everything flat.
step_model() {  # step_model FILE FLAT_BUSBW: a two-link model file as scale-bench fit writes it
  jq -n --argjson flat "$2" '{format: "shardtrain-scaling-model", version: 1, compute_s: 0.1, scaling: "weak",
    tokens_per_step: 1000, busbw_Bps: $flat, alpha_s: 1e-5, overlap: 0, straggler: 0, collectives: [],
    intra_node: {busbw_Bps: 1e9, alpha_s: 2e-5}, inter_node: {busbw_Bps: 1e8, alpha_s: 2e-5}}' >"$1"
}
export SHARDTRAIN_NODE_OF_RANK=a,a,b,b
step_model "$WORK/slow_link.json" 1e8
run 4 "$WORK/auto_model" ddp-train --deterministic --allreduce auto --step-model "$WORK/slow_link.json"
grep -q "allreduce: auto by the step model $WORK/slow_link.json on 2 nodes x 2 ranks: hierarchical for AllReduce from 2223 bytes" \
  "$WORK/auto_model.log" || { cat "$WORK/auto_model.log" >&2; fail "auto with a step model: not the model's threshold"; }
expect_verdict BITWISE "$WORK/ref/params.h5" "$WORK/auto_model/params.h5"
jq -e '.communication | .hierarchical_from_bytes.AllReduce == 2223 and .levels["dp.cross"].AllReduce.calls > 0
       and .AllReduce.calls > 0' "$WORK/auto_model/summary.json" >/dev/null ||
  fail "auto with a step model: the summary does not show big all-reduces through the levels and small ones flat"
step_model "$WORK/fast_flat.json" 1e10
run 4 "$WORK/auto_flat" ddp-train --deterministic --allreduce auto --step-model "$WORK/fast_flat.json"
grep -q "flat at every size" "$WORK/auto_flat.log" || { cat "$WORK/auto_flat.log" >&2; fail "auto, fast flat path: not flat"; }
jq -e '.communication | has("levels") | not' "$WORK/auto_flat/summary.json" >/dev/null || fail "auto, fast flat path: levels in the summary"
expect_verdict BITWISE "$WORK/ref/params.h5" "$WORK/auto_flat/params.h5"
expect_exit2 "--step-model chooses flat or hierarchical per collective size under --allreduce auto" \
  mpirun -np 1 "$BIN_DIR/ddp-train" --data "$DATA" "${model[@]}" --allreduce halving --step-model "$WORK/slow_link.json" \
  --run-dir "$WORK/bad_step_model"
pass "--allreduce auto --step-model: hierarchical from the model's crossing size (2223 bytes on 2 x 2), flat below, bitwise W=1"

# Fast mode: the same training, within the fast-mode tolerance of the flat W = 4 run.
run 4 "$WORK/fast_flat" ddp-train
run 4 "$WORK/fast_hier" ddp-train --allreduce hierarchical
# (tolerance as in ddp_equivalence.sh's fast runs; BITWISE would pass too, the sums' order permitting)
"$BIN_DIR/equiv-check" "$WORK/fast_hier/params.h5" "$WORK/fast_flat/params.h5" --atol 1e-6 --rtol 1e-4 | grep '^verdict:' ||
  fail "fast hierarchical is not within atol 1e-6 + rtol 1e-4 of fast flat"
pass "fast ddp-train 2 x 2 hierarchical is within tolerance of fast flat"

# One node: flat, and said so.
export SHARDTRAIN_NODE_OF_RANK=n,n,n,n
run 4 "$WORK/one_node" ddp-train --deterministic --allreduce hierarchical
grep -q "allreduce: hierarchical over 1 node (flat: every rank on one node)" "$WORK/one_node.log" || fail "one node: not flat"
expect_verdict BITWISE "$WORK/ref/params.h5" "$WORK/one_node/params.h5"
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['communication']; assert 'levels' not in c and c['allreduce_algorithm'] != 'hierarchical'" \
  "$WORK/one_node/summary.json" || fail "one node: the summary shows levels"
pass "one node: --allreduce hierarchical is the flat path"

# A hang in a stage: rank 2 skips its cross-node all-reduce; hang-diagnose names rank 2 and that
# stage's group, seq, step and phase (the node-gather stage behind it waits "queued", not joined).
export SHARDTRAIN_NODE_OF_RANK=a,a,b,b
rc=0
run 4 "$WORK/hang" ddp-train --allreduce hierarchical --inject skip-collective:rank=2,step=2,group=dp.cross \
  --collective-timeout 5 2>/dev/null || rc=$?
[ "$rc" -eq 4 ] || fail "the skipped stage should end the job with exit 4 (got $rc)"
diag=$("$BIN_DIR/hang-diagnose" "$WORK/hang" 2>&1 || true)
echo "$diag" | grep '^culprit:'
echo "$diag" | grep -q '^culprit: rank 2 .*skipped dp.cross seq [0-9]* AllReduce (step 2, backward[,)]' ||
  { echo "$diag" >&2; fail "hang-diagnose does not name rank 2's skipped dp.cross stage"; }
pass "a skipped cross-node stage: hang-diagnose names rank, group, seq, step and phase"

export SHARDTRAIN_NODE_OF_RANK=a,a,b
mkdir -p "$WORK/bad"
expect_exit2 "SHARDTRAIN_NODE_OF_RANK='a,a,b' names 3 rank(s) but the job has 4" \
  mpirun -np 4 --oversubscribe -x SHARDTRAIN_NODE_OF_RANK "$BIN_DIR/ddp-train" --data "$DATA" "${model[@]}" \
  --peak-gflops 100 --allreduce hierarchical --run-dir "$WORK/bad"
pass "a wrong override exits 2 naming it"
