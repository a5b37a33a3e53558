#!/usr/bin/env bash
# The fault matrix across real nodes (issue 47): fault_matrix_two_level.sh's cases (a hang in
# compute, a skipped collective, a wrong count, a kill on rank 3 at step 3; DDP under the flat and
# the hierarchical all-reduce, one piece and pipelined, and ZeRO-3's two-level all-gathers) on the
# cluster in a box of two nodes (scripts/cluster/box.sh: a network, UTS and mount namespace per
# node, a private bridge; nothing in the host's network changes), 2 nodes x 2 ranks, mpirun inside
# `salloc -N2 -n4`. Every verdict must name rank 3 and its host node2 with the flat algorithm's
# class, phase and step, never a victim. The box uses its own network (BOX_NET 10.213.0) and is
# stopped, with every process of its namespaces, at the end, pass or fail.
#
# Usage: fault_matrix_box.sh BIN_DIR WORK_DIR [ONLY]   (ONLY: one case name)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
box="$repo/scripts/cluster/box.sh"
if [ "$(id -u)" -ne 0 ] || ! unshare --net --uts --mount true 2>/dev/null; then
  echo "SKIPPED: fault_matrix_box needs root and network/UTS/mount namespaces (unshare); none here"; exit 77
fi
BIN_DIR=$(cd "$1" && pwd)
WORK=$2 ONLY=${3:-}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
# A box left by an earlier run that was killed (a ctest timeout KILLs, no trap runs).
prev=$(cat "$WORK/shared-dir" 2>/dev/null || echo "$WORK")
[ -s "$prev/box/box.env" ] && bash "$box" stop "$prev/box" >/dev/null 2>&1 || true
[ "$prev" != "$WORK" ] && rm -rf "$prev"
# The nodes see the machine's folders except /tmp (each node has its own): the jobs' folders and
# tools move to a folder of /var/tmp when the checkout is under /tmp.
shared=$WORK
if [[ "$WORK/" == /tmp/* || "$BIN_DIR/" == /tmp/* ]]; then
  shared=$(mktemp -d /var/tmp/shardtrain-faultbox.XXXXXX)
  echo "$shared" >"$WORK/shared-dir"
  if [[ "$BIN_DIR/" == /tmp/* ]]; then cp -r "$BIN_DIR" "$shared/bin" && BIN_DIR="$shared/bin"; fi
fi
B="$shared/box"
cleanup() {
  local rc=$?
  set +e
  ((rc != 0)) && [ -s "$B/box.env" ] && bash "$box" status "$B" >&2
  [ -s "$B/box.env" ] && { bash "$box" stop "$B" || rc=1; }
  [ "$shared" != "$WORK" ] && rm -rf "$shared"
  exit "$rc"
}
trap cleanup EXIT
export BOX_NET=10.213.0 BOX_CPUS=2
rm -rf "$B"  # a fresh controller state: an old one may still hold the last run's allocations
bash "$box" start "$B" -n 2
FAULT_BOX=$B bash "$repo/tests/scripts/fault_matrix_two_level.sh" "$BIN_DIR" "$shared/matrix" "$ONLY"
