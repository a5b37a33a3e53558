#!/usr/bin/env bash
# The device bundle's rehearsal: the archive of scripts/device-bundle.sh unpacked into a minimal
# Debian root (debootstrap --variant=minbase, cached by scripts/minbase-root.sh) that holds none of
# the project's dependencies (no Open MPI, HDF5, oneDNN, OpenMP runtime, CUDA, Python), and inside it,
# through chroot and with an empty environment:
#   - the launcher's library report says clearly that no CUDA library was found;
#   - every tool's --help, and shardtrain_tests "[gpu]" skipping (exit 77: no device);
#   - a 1-rank and a 2-rank CPU training run (deterministic mode) with the bundle's mpirun,
#     equiv-check on their parameters (BITWISE) and step logs, and a 2-rank run with a skipped
#     collective whose flight records hang-diagnose reads (exit 1, culprit rank 1).
# Then, on this machine, gpu-check.sh from the unpacked bundle (--dry-run: env, build, data and
# gpu_tests): no build, every file checked against manifest.json, and an altered file named.
# This is the proof that the GPU machine will not fail for a missing library or Open MPI file.
# /proc, /sys and /dev/shm are mounted inside the root and unmounted on every exit.
#
# Usage: bundle_rehearsal.sh BIN_DIR WORK_DIR      (the build folder is BIN_DIR/..)
# Exit 77 (skipped) for a CPU-only build or when not root (chroot and mount need root).
# Environment: SHARDTRAIN_ROOT_CACHE (scripts/minbase-root.sh's cache folder), BUNDLE_ARCHIVE (an
#   archive to rehearse instead of packing BUILD's with scripts/device-bundle.sh).
# SC2016: in_root's commands are single-quoted, their $B expands inside the root; SC2015: `A && B ||
# fail` fails unless both hold; SC2013, SC2012: mount points, sonames and tool names hold no spaces.
# shellcheck disable=SC2016,SC2015,SC2013,SC2012
set -euo pipefail
BIN_DIR=$1 WORK=$2
BUILD=$(cd "$BIN_DIR/.." && pwd)
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
# common.sh's checks (common.sh itself is not sourced: its rm -rf of WORK would cross the root's mounts).
checks() { python3 "$SRC/tests/scripts/checks.py" "$@"; }
t0=$SECONDS
lap() { echo "time: $1 at $((SECONDS - t0)) s"; }

[ "$(id -u)" -eq 0 ] || { echo "skipped: chroot and mount need root"; exit 77; }
ls "$BUILD"/CMakeFiles/*/CMakeCUDACompiler.cmake >/dev/null 2>&1 ||
  { echo "skipped: $BUILD is a CPU-only build; the bundle needs the CUDA toolkit (nvcc)"; exit 77; }

root="$WORK/root"
mounts=("$root/proc" "$root/sys" "$root/dev/shm")
unmount_all() {  # every mount under the root, deepest first; lazily if busy
  local m
  for m in $(awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done
}
cleanup() {
  unmount_all
  if awk -v r="$root/" 'index($2, r) == 1 {found = 1} END {exit !found}' /proc/mounts; then
    echo "WARNING: mounts remain under $root; not removing it" >&2
  else
    rm -rf --one-file-system "$root"
  fi
}
# A run killed at its ctest timeout leaves its mounts: take them down before removing anything.
mkdir -p "$WORK"
cleanup
rm -rf --one-file-system "$WORK" && mkdir -p "$WORK"
trap cleanup EXIT

# --no-build: ctest rehearses what was built; packing is skipped when the archive is up to date.
archive=${BUNDLE_ARCHIVE:-$("$SRC/scripts/device-bundle.sh" --build "$BUILD" --no-build | tail -1)}
lap "bundle ready ($(du -h "$archive" | cut -f1))"
tarball=$("$SRC/scripts/minbase-root.sh")
mkdir "$root"
tar -C "$root" -xf "$tarball"
lap "minbase root unpacked from $tarball"

# The root holds none of the project's dependencies.
for lib in libmpi.so.40 libhdf5_serial.so.103 libdnnl.so.2 libgomp.so.1 libcudart.so.13 libcublas.so.13 libnccl.so.2 libcuda.so.1; do
  cache=$(chroot "$root" /sbin/ldconfig -p)
  if grep -q "$lib" <<<"$cache"; then fail "the minimal root already has $lib"; fi
done
for t in mpirun python3 nvcc h5dump; do
  if chroot "$root" /bin/sh -c "command -v $t" >/dev/null; then fail "the minimal root already has $t"; fi
done
pass "the root has no Open MPI, HDF5, oneDNN, libgomp, CUDA or Python"

tar -C "$root/opt" -xJf "$archive"
B=/opt/shardtrain-gpu-bundle
[ -x "$root$B/launch" ] || fail "the archive holds no $B/launch"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys" 2>/dev/null || mount --bind -o ro /sys "$root/sys"
mount -t tmpfs tmpfs "$root/dev/shm"
for m in "${mounts[@]}"; do mountpoint -q "$m" || fail "$m is not mounted"; done
lap "bundle unpacked into $root$B, /proc /sys /dev/shm mounted"

# in_root CMD...: a bash command inside the root, with an empty environment and the bundle's launcher.
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp B=$B /bin/bash -c "$1"; }

report=$(in_root '$B/launch --report') || fail "launch --report exited non-zero: $report"
echo "$report"
grep -q "NO CUDA LIBRARIES FOUND" <<<"$report" || fail "the report does not say that no CUDA library was found"
for so in $(cat "$root$B/lib/device-libs.txt"); do
  grep -q "$so *NOT FOUND" <<<"$report" || fail "the report does not name $so as not found"
done
grep -q "CUDA driver (libcuda.so.1): NOT FOUND" <<<"$report" || fail "the report does not say the driver is missing"
pass "the launcher reports no CUDA library, no driver, and the stand-ins"

tools=$(cd "$SRC/tools" && ls ./*.cpp | sed 's|^\./||; s|\.cpp$||')
for t in $tools; do
  out=$(in_root "\$B/launch $t --help" 2>&1) || fail "$t --help failed inside the root: $out"
  grep -qi usage <<<"$out" || fail "$t --help printed no usage: $out"
done
pass "every tool's --help runs inside the root: ${tools//$'\n'/ }"
rc=0; out=$(in_root '$B/launch $B/tests/shardtrain_tests "[gpu]"' 2>&1) || rc=$?
[ "$rc" -eq 77 ] || fail "shardtrain_tests [gpu] exited $rc without a device (expected 77, skipped): $out"
pass "shardtrain_tests [gpu] skips with exit 77 (no device)"
lap "reports and --help done"

# Training with the bundle's mpirun on the bundle's fortunes dataset.
small='--data $B/data/fortunes.h5 --seq-len 32 --layers 2 --heads 2 --d-model 32 --threads 1 --peak-gflops 100 --log-every 1000'
in_root "mkdir -p /work && cd /work &&
  \$B/launch mpirun -np 1 ddp-train $small --steps 6 --global-batch 4 --micro-batch 2 --deterministic --run-dir /work/w1 >/work/w1.log 2>&1" ||
  { cat "$root/work/w1.log"; fail "the 1-rank run failed inside the root"; }
in_root "cd /work && \$B/launch mpirun -np 2 --oversubscribe ddp-train $small --steps 6 --global-batch 4 --micro-batch 2 \
  --deterministic --run-dir /work/w2 >/work/w2.log 2>&1" || { cat "$root/work/w2.log"; fail "the 2-rank run failed inside the root"; }
grep -h "mpirun\|orterun" "$root/work/w2.log" | head -3 || true
pass "1-rank and 2-rank CPU training runs with the bundle's mpirun"
lap "training runs done"

out=$(in_root '$B/launch equiv-check /work/w2/params.h5 /work/w1/params.h5' 2>&1) || fail "equiv-check params: $out"
grep -q "^verdict: BITWISE" <<<"$out" || fail "W=2 vs W=1 parameters not BITWISE in deterministic mode: $out"
out=$(in_root '$B/launch equiv-check /work/w2/steps.rank0.jsonl /work/w1/steps.rank0.jsonl --rtol 1e-6' 2>&1) ||
  fail "equiv-check step logs: $out"
pass "equiv-check inside the root: parameters BITWISE, step logs $(grep '^verdict' <<<"$out")"

rc=0
in_root "cd /work && \$B/launch mpirun -np 2 --oversubscribe ddp-train $small --steps 6 --global-batch 4 --micro-batch 2 \
  --collective-timeout 3 --inject skip-collective:rank=1,step=2 --run-dir /work/hang >/work/hang.log 2>&1" || rc=$?
[ "$rc" -ne 0 ] || fail "the run with a skipped collective exited 0"
rc=0; out=$(in_root '$B/launch hang-diagnose --json /work/hang' 2>/dev/null) || rc=$?
[ "$rc" -eq 1 ] || { cat "$root/work/hang.log"; fail "hang-diagnose exited $rc on the faulty run, expected 1"; }
jq -r '"  hang-diagnose: \(.verdict) \(.culprit | tojson)"' <<<"$out" && jq -e '.culprit.rank == 1' <<<"$out" >/dev/null ||
  { cat "$root/work/hang.log"; fail "hang-diagnose did not name rank 1 as the culprit"; }
in_root '$B/launch hang-diagnose /work/hang' 2>&1 | head -5 || true
pass "hang-diagnose inside the root names the rank that skipped the collective"
lap "chroot rehearsal done"

# gpu-check.sh from the unpacked bundle (here, on the host, in its CPU dry run): no build, every
# file checked against the manifest, the launcher's environment; then one file altered is named.
unmount_all
host="$WORK/host"
mkdir -p "$host" && tar -C "$host" -xJf "$archive"
HB="$host/shardtrain-gpu-bundle"
env -u BUILD_DIR -u FORTUNES OUT="$WORK/gpucheck" "$HB/gpu-check.sh" --dry-run --only env,build,data,gpu_tests \
  >"$WORK/gpucheck.log" 2>&1 || { cat "$WORK/gpucheck.log"; fail "gpu-check.sh --dry-run from the bundle failed"; }
checks gpu-check-bundle "$WORK/gpucheck/gpu-check" "$HB" || fail "gpu-check.sh from the bundle: its JSON"
printf 'x' >>"$HB/data/fortunes.h5"
rc=0; OUT="$WORK/gpucheck2" "$HB/gpu-check.sh" --dry-run --only build >"$WORK/gpucheck2.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "gpu-check.sh accepted a bundle with an altered file (exit $rc)"
jq -e '.result.sha256_mismatch == ["data/fortunes.h5"]' "$WORK/gpucheck2/gpu-check/build.json" >/dev/null ||
  fail "the altered file is not the one named"
pass "gpu-check.sh runs from the bundle without a build, checks every file, names an altered one"
lap "rehearsal done"
echo "bundle_rehearsal: all checks passed in $((SECONDS - t0)) s"
