#!/usr/bin/env bash
# ckpt-reshard against the disk, side by side in one run: a ~100M-parameter decoder (d_model 768,
# 12 layers; parameters + two AdamW moments = 1.0 GB fp32) is checkpointed by fsdp-train at W=2,
# ZeRO-3; then, on the same disk:
#   dd     the source checkpoint's own bytes (cat rank_*.h5, from the page cache) through dd bs=1M
#          conv=fdatasync: the disk's write bandwidth with a flush for this data, alternating with
#   reshard ckpt-reshard --world 3 --zero-stage 1: validate the source (SHA-256 of every file),
#          read every piece, write and fsync 3 rank files + index, verify every tensor's sum64
# in ROUNDS (default 5) alternating rounds, and prints bytes, seconds and GB/s of both per round and
# the ratio of the medians. The whole ckpt-reshard command is timed (MPI start-up included). NP=1
# runs it as one plain process (the man page's one-process form); NP>1, or LAUNCH=mpirun, under
# mpirun -np NP, whose default binding gives a one- or two-process job one core per process (the
# one-process reshard then runs its hashing and flushing threads on that one core). The source was
# just written, so it is read from the page cache as on a node that just saved it (the page cache
# is not dropped: that would disturb other jobs on the machine). Not /dev/zero: on the virtual
# disk here, dd of zeros ran at 0.63-0.71 GB/s while dd of this checkpoint's bytes ran at 0.11-0.61
# GB/s in the same minutes (both vary up to 4x from one run to the next), hence also the rounds.
#
# Usage: [ROUNDS=5] [LAUNCH=direct|mpirun] [BUILD_DIR=build] scripts/bench-reshard.sh [NP]
#        (NP: processes running ckpt-reshard, default 1)
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
np="${1:-1}"
launch="${LAUNCH:-$([ "$np" = 1 ] && echo direct || echo mpirun)}"
case "$launch" in
  direct) [ "$np" = 1 ] || { echo "bench-reshard: LAUNCH=direct runs one process; NP=$np needs LAUNCH=mpirun" >&2; exit 2; }
          runner=() ;;
  mpirun) runner=(mpirun -np "$np") ;;
  *) echo "bench-reshard: LAUNCH is direct or mpirun, not '$launch'" >&2; exit 2 ;;
esac
[ -x "$build/bin/ckpt-reshard" ] || { echo "bench-reshard: build ckpt-reshard first ($build/bin)" >&2; exit 2; }
work="$tmp"
mpirun -np 2 "$build/bin/fsdp-train" --data "$here/data/fortunes.h5" --d-model 768 --layers 12 --heads 12 \
  --seq-len 256 --micro-batch 1 --global-batch 6 --steps 1 --ckpt-every 1 --zero-stage 3 --peak-gflops 200 \
  --threads 1 --log-every 1000 --run-dir "$work/run" >"$work/train.log" 2>&1 || { cat "$work/train.log" >&2; exit 1; }
src="$work/run/checkpoints/step_00000001"
sync
params=$("$build/bin/ckpt-reshard" --inspect "$src" --json | jq -er .parameters)
src_bytes=$(du -sb "$src" | cut -f1)
dd_run() {  # dd_run BYTES -> seconds
  local mib=$(( ($1 + 1048575) / 1048576 ))
  local t0 t1
  t0=$(date +%s.%N)
  cat "$src"/rank_*.h5 | dd of="$work/dd.bin" bs=1M count="$mib" iflag=fullblock conv=fdatasync status=none
  t1=$(date +%s.%N)
  rm -f "$work/dd.bin"
  calc "$t1 - $t0"
}
rounds="${ROUNDS:-5}"
rows=()
for i in $(seq 1 "$rounds"); do  # alternating rounds: the disk is noisy (single dd runs vary 2x and more)
  d=$(dd_run "$src_bytes")
  t0=$(date +%s.%N)
  "${runner[@]}" "$build/bin/ckpt-reshard" "$src" --world 3 --zero-stage 1 --out "$work/r$i" >"$work/reshard.log" 2>&1 ||
    { cat "$work/reshard.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  out_bytes=$(du -sb "$work/r$i/step_00000001" | cut -f1)
  rows+=("$d $(calc "$t1 - $t0") $out_bytes")
  rm -rf "$work/r$i"
done
figures reshard "$params" "$src_bytes" "$np ($launch)" "${rows[@]}"
grep "ckpt-reshard: wrote" "$work/reshard.log" | sed 's/^/  /'
