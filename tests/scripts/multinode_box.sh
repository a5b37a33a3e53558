#!/usr/bin/env bash
# The project across nodes on a real 3-node Slurm cluster: scripts/cluster/box.sh (a network, UTS
# and mount namespace per node, a private bridge; nothing in the host's network changes). Checks:
#   1  sinfo shows node1..node3 idle; `srun -N3 hostname` answers three distinct hostnames
#   2  an allocation of 3 nodes (salloc -N3 -n3): mpirun puts one rank on each node (hostnames), and
#      ddp-train across them (30 deterministic steps, Open MPI over TCP on the box's network) ends
#      with parameters BITWISE equal to a one-rank run's (equiv-check)
#   3  the same job launched by `srun --mpi=pmix -N3`: BITWISE too
#   4  a node's link shaped (tc tbf, 20mbit): a TCP copy between two nodes slows by more than 5x,
#      to about the shaped rate; restored, it is fast again
#   5  a second ddp-train on the run folder of a running job, from another node, is refused at once
#      (exit 2, the message names the owner's Slurm job and host)
#   6  node loss survived: a 3-node deterministic job (mpirun inside salloc -N3 -n3 --no-kill, under
#      run-resilient --min-ranks 1) loses node3 mid-run; the launcher's verdict is node-lost host
#      node3 (ranks 2), the job goes on without it on node1 and node2 in the same allocation, and its
#      final checkpoint (parameters and moments) is BITWISE an uninterrupted run's; the time from the
#      loss to the verdict and to the first resumed step are printed
#   7  node3 lost (every process of it killed at once): Slurm marks it not responding, then DOWN
#      (the times are printed); restored, it is idle again and serves `srun -N3`
# Then the cluster is stopped and no process of its namespaces is left (box.sh stop checks; so
# does this script, and that the host's hostname and links are as before). The last lines list
# every job: id, nodes, state.
#
# Usage: multinode_box.sh BIN_DIR WORK_DIR
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
box="$repo/scripts/cluster/box.sh"
# The box needs root and namespaces (unshare); without them there is nothing to test here.
if [ "$(id -u)" -ne 0 ] || ! unshare --net --uts --mount true 2>/dev/null; then
  echo "SKIPPED: multinode_box needs root and network/UTS/mount namespaces (unshare); none here"; exit 77
fi
# A box left by an earlier run of this test that was killed (a ctest timeout KILLs, no trap runs),
# in the work folder or in the shared folder that run made (below).
prev=$(cat "$2/shared-dir" 2>/dev/null || echo "$2")
[ -s "$prev/box/box.env" ] && bash "$box" stop "$prev/box" >/dev/null 2>&1 || true
[ "$prev" != "$2" ] && rm -rf "$prev"
BIN_DIR=$(cd "$1" && pwd)
WORK=$2
. "$repo/tests/scripts/common.sh"
WORK=$(cd "$WORK" && pwd)
# Every node sees the machine's folders except /tmp, which each node has its own of: the jobs'
# folders and the tools they run must be elsewhere, as on a cluster's shared file system. A work
# or build folder under /tmp (a checkout there) moves to a folder of /var/tmp, removed at the end.
shared=""
if [[ "$WORK/" == /tmp/* || "$BIN_DIR/" == /tmp/* ]]; then
  shared=$(mktemp -d /var/tmp/shardtrain-multinode.XXXXXX)
  echo "$shared" >"$WORK/shared-dir"
  cp "$DATA" "$shared/" && DATA="$shared/$(basename "$DATA")"
  if [[ "$BIN_DIR/" == /tmp/* ]]; then cp -r "$BIN_DIR" "$shared/bin" && BIN_DIR="$shared/bin"; fi
  echo "  the build or work folder is under /tmp: the cluster's shared folder is $shared"
  WORK=$shared
fi
B="$WORK/box"
t0=$SECONDS
step() { echo "--- [$((SECONDS - t0))s] $*"; }
inbox() { bash "$box" exec "$B" "$@"; }

host_before="$(hostname) $(ip -o link | awk '{ print $2 }' | tr '\n' ' ')"
cleanup() {
  local rc=$?
  set +e
  if ((rc != 0)); then
    echo "--- the cluster on failure:" >&2
    bash "$box" status "$B" >&2
    tail -n 20 "$B/log/slurmctld.log" >&2
  fi
  bash "$box" stop "$B" || rc=1
  if [ -n "$shared" ]; then rm -rf "$shared"; fi
  exit "$rc"
}
trap cleanup EXIT

step "start: 3 nodes"
BOX_SLURMD_TIMEOUT=10 bash "$box" start "$B" -n 3
states=$(inbox -- sinfo -h -N -o '%N=%T' | sort -u | tr '\n' ' ')
echo "  sinfo: $states"
[ "$states" = "node1=idle node2=idle node3=idle " ] || fail "sinfo should show node1..3 idle"
pass "sinfo shows node1, node2, node3 idle"
names=$(inbox -- srun -N3 hostname 2>/dev/null | sort | tr '\n' ' ')
echo "  srun -N3 hostname: $names"
[ "$names" = "node1 node2 node3 " ] || fail "srun -N3 should answer node1 node2 node3"
pass "srun -N3: three distinct hostnames"

step "ddp-train across 3 nodes (mpirun inside salloc -N3 -n3) against one rank"
base=(--data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 --peak-gflops 100 --log-every 1000
      --global-batch 6 --micro-batch 2 --deterministic)
opts=("${base[@]}" --steps 30)
"$BIN_DIR/ddp-train" "${opts[@]}" --run-dir "$WORK/w1" >"$WORK/w1.log" 2>&1 || { cat "$WORK/w1.log" >&2; fail "the one-rank run failed"; }
# One allocation, two launches: where mpirun puts the ranks, then the training.
inbox -- timeout 120 salloc -N3 -n3 sh -c "mpirun hostname | sort | tr '\n' ' ' >'$WORK/mpirun-hosts.txt'; \
  mpirun '$BIN_DIR/ddp-train' $(printf "'%s' " "${opts[@]}") --run-dir '$WORK/mpirun3'" >"$WORK/mpirun3.log" 2>&1 ||
  { cat "$WORK/mpirun3.log" >&2; fail "salloc -N3 mpirun ddp-train failed"; }
echo "  mpirun's ranks ran on: $(cat "$WORK/mpirun-hosts.txt")"
[ "$(cat "$WORK/mpirun-hosts.txt")" = "node1 node2 node3 " ] || fail "mpirun should place one rank on each node"
grep -q "on 3 ranks" "$WORK/mpirun3.log" || { cat "$WORK/mpirun3.log" >&2; fail "the run is not on 3 ranks"; }
expect_verdict BITWISE "$WORK/w1/params.h5" "$WORK/mpirun3/params.h5"
pass "mpirun across 3 nodes: BITWISE the one-rank run"

step "ddp-train across 3 nodes (srun --mpi=pmix -N3 -n3)"
inbox -- timeout 120 srun -N3 -n3 --mpi=pmix "$BIN_DIR/ddp-train" "${opts[@]}" --run-dir "$WORK/pmix3" >"$WORK/pmix3.log" 2>&1 ||
  { cat "$WORK/pmix3.log" >&2; fail "srun --mpi=pmix across 3 nodes failed"; }
grep -q "on 3 ranks" "$WORK/pmix3.log" || { cat "$WORK/pmix3.log" >&2; fail "the run is not on 3 ranks"; }
expect_verdict BITWISE "$WORK/w1/params.h5" "$WORK/pmix3/params.h5"
pass "srun --mpi=pmix across 3 nodes: BITWISE the one-rank run"

step "link shaping: node1 -> node2 copy, before and after tc tbf 20mbit on node2"
read -r full full_s < <(bash "$box" rate "$B" node1 node2 32)
bash "$box" shape "$B" node2 20mbit
read -r slow slow_s < <(bash "$box" rate "$B" node1 node2 4)
bash "$box" restore "$B" node2
read -r back _ < <(bash "$box" rate "$B" node1 node2 32)
echo "  node1 -> node2: full ${full} MiB/s (32 MiB in ${full_s} s); shaped to 20mbit (2.38 MiB/s): ${slow} MiB/s (4 MiB in ${slow_s} s); restored: ${back} MiB/s"
awk -v f="$full" -v s="$slow" 'BEGIN { exit !(s * 5 < f && s < 2.38 * 1.25 && s > 2.38 * 0.5) }' ||
  fail "the shaped copy (${slow} MiB/s) should be near 2.38 MiB/s and over 5x slower than ${full} MiB/s"
awk -v f="$full" -v b="$back" 'BEGIN { exit !(b * 5 > f) }' || fail "the restored link (${back} MiB/s) is still slow"
pass "shaping slows the copy $(awk -v f="$full" -v s="$slow" 'BEGIN { printf "%.0fx", f / s }'); restore undoes it"

step "one owner per run folder: a second job on a running job's --run-dir, from another node"
owner_dir="$WORK/owned"
inbox -- sbatch -N1 -w node1 -J owner -o "$WORK/owner.out" --wrap \
  "'$BIN_DIR/ddp-train' $(printf "'%s' " "${base[@]}") --steps 100000 --run-dir '$owner_dir'" >/dev/null
for _ in $(seq 1 100); do grep -q "\"step\"" "$owner_dir/steps.rank0.jsonl" 2>/dev/null && break; sleep 0.2; done
grep -q "\"step\"" "$owner_dir/steps.rank0.jsonl" 2>/dev/null || { cat "$WORK/owner.out" >&2; fail "the first job did not start training"; }
owner_job=$(inbox -- squeue -h -n owner -o %i)
rc=0
second=$(inbox -- timeout 60 srun --mpi=pmix -N1 -w node2 "$BIN_DIR/ddp-train" "${opts[@]}" --run-dir "$owner_dir" 2>&1) || rc=$?
echo "  second job on node2 -> exit $rc: $(echo "$second" | grep -m1 'error' | cut -c1-240)"
((rc == 2)) || { echo "$second" >&2; fail "the second job should exit 2"; }
echo "$second" | grep -q "job $owner_job" && echo "$second" | grep -q "node1" ||
  fail "the refusal should name the owner's job $owner_job and host node1"
inbox -- scancel "$owner_job"
pass "the second job is refused (exit 2) naming job $owner_job on node1"

step "node loss survived: a 3-node job under run-resilient loses node3 mid-run"
# Micro-batch 1: the global batch's 6 micro-batches divide by the 2 ranks left.
lost_opts=(--data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 --peak-gflops 100 --log-every 1000
           --global-batch 6 --micro-batch 1 --deterministic --steps 2000 --ckpt-every 100 --collective-timeout 10)
"$BIN_DIR/ddp-train" "${lost_opts[@]}" --run-dir "$WORK/lost_ref" >"$WORK/lost_ref.log" 2>&1 ||
  { cat "$WORK/lost_ref.log" >&2; fail "the uninterrupted run failed"; }
inbox -- timeout 240 salloc -N3 -n3 --no-kill "$BIN_DIR/run-resilient" --min-ranks 1 --max-restarts 3 --backoff 0 -- \
  mpirun -np 3 "$BIN_DIR/ddp-train" "${lost_opts[@]}" --run-dir "$WORK/lost" >"$WORK/lost.log" 2>&1 &
job_pid=$!
# Up to 3 minutes: salloc may first wait for the previous case's cancelled job to end on node1.
n=0
for _ in $(seq 1 1800); do
  n=$(grep -c '"step":' "$WORK/lost/steps.rank0.jsonl" 2>/dev/null || true)
  [ "${n:-0}" -ge 300 ] && break
  kill -0 "$job_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$job_pid" 2>/dev/null || { cat "$WORK/lost.log" >&2; fail "the job ended before node3 could be lost"; }
[ "${n:-0}" -ge 300 ] || fail "the job did not reach step 300 within 3 minutes"
bash "$box" lose "$B" node3
t_lost=$(date +%s.%N)
rc=0
wait "$job_pid" || rc=$?
((rc == 0)) || { cat "$WORK/lost.log" >&2; fail "the job did not survive the lost node (exit $rc)"; }
grep "run-resilient: verdict\|world size\|node .* lost\|succeeded" "$WORK/lost.log" | sed 's/^/  /'
grep -q "verdict attempt 0: node-lost host node3 (ranks 2)" "$WORK/lost.log" || fail "the verdict should be node-lost host node3 (ranks 2)"
read -r relaunch first_step < <(jq -r '[.restarts[0].relaunch_time, .restarts[0].first_resumed_step_time] | @tsv' "$WORK/lost/restarts.json")
verdict_at=$(jq -r '.command_ended_at + .analysis_s' "$WORK/lost/attempt0.verdict.json")
since() { awk -v a="$t_lost" -v b="$1" 'BEGIN { printf "%.1f", b - a }'; }
echo "  from the loss: verdict after $(since "$verdict_at") s, relaunch after $(since "$relaunch") s (Slurm dropped the node first), first resumed step after $(since "$first_step") s; world $(jq -r '.restarts[0] | "\(.previous_world_size) -> \(.world_size)"' "$WORK/lost/restarts.json")"
awk -v a="$t_lost" -v b="$verdict_at" 'BEGIN { exit !(b - a <= 10 + 3) }' || fail "the verdict came later than the collective timeout + 3 s"
awk -v a="$t_lost" -v b="$first_step" 'BEGIN { exit !(b - a <= 30) }' || fail "the first resumed step came more than 30 s after the loss"
[ "$(jq -r '.restarts[0].world_size' "$WORK/lost/restarts.json")" = 2 ] || fail "the restart should run on the 2 ranks left"
expect_verdict BITWISE "$WORK/lost/checkpoints" "$WORK/lost_ref/checkpoints"
pass "a lost node named (node-lost host node3), the job finished on node1 and node2, its final state BITWISE"
bash "$box" restore "$B" node3
for _ in $(seq 1 60); do [ "$(inbox -- sinfo -h -n node3 -o %T 2>/dev/null)" = idle ] && break; sleep 0.5; done

step "node loss: node3 killed whole"
bash "$box" lose "$B" node3
t_lost=$(date +%s.%N) t_nr="" t_down=""
for _ in $(seq 1 240); do
  st=$(inbox -- sinfo -h -n node3 -o %T 2>/dev/null || true)
  now=$(date +%s.%N)
  [[ -z "$t_nr" && "$st" == *'*' ]] && t_nr=$now
  [[ "$st" == down* ]] && { t_down=$now; break; }
  sleep 0.25
done
[ -n "$t_down" ] || fail "node3 not DOWN 60 s after it was lost (state '$st')"
echo "  node3: not responding after $(awk -v a="$t_lost" -v b="${t_nr:-$t_down}" 'BEGIN { printf "%.1f", b - a }') s, DOWN after $(awk -v a="$t_lost" -v b="$t_down" 'BEGIN { printf "%.1f", b - a }') s (SlurmdTimeout 10 s): $(inbox -- sinfo -h -n node3 -o '%T %E')"
pass "Slurm marks the lost node DOWN"
t_back=$SECONDS
bash "$box" restore "$B" node3
names=$(inbox -- timeout 60 srun -N3 hostname 2>/dev/null | sort | tr '\n' ' ')
echo "  restored in $((SECONDS - t_back)) s; srun -N3 hostname: $names"
[ "$names" = "node1 node2 node3 " ] || fail "the restored node3 should serve srun -N3"
pass "node3 restored serves again"

step "jobs"
sed -E 's/.*JobId=([0-9]+).*Name=([^ ]*).*JobState=([A-Z_]+).*NodeList=([^ ]*).*/  job \1 \2 \4 \3/' "$B/log/jobcomp.txt"

step "stop"
trap - EXIT
bash "$box" stop "$B"
if [ -n "$shared" ]; then rm -rf "$shared"; fi
host_after="$(hostname) $(ip -o link | awk '{ print $2 }' | tr '\n' ' ')"
[ "$host_before" = "$host_after" ] || fail "the host changed: before '$host_before', after '$host_after'"
for p in /proc/[0-9]*; do
  tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$B/slurm.conf" &&
    fail "process ${p#/proc/} ($(cat "$p/comm")) of the box outlived it"
done
pass "stopped: no process of the box left; the host's hostname and links as before ($((SECONDS - t0)) s in all)"
