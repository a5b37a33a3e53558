#!/usr/bin/env bash
# The layering must fail where it is broken, naming the file:
#   (1) an upward include (base, the lowest layer, including a train header) fails `cmake --build`
#       of a copy of the tree, the compiler naming the file and line;
#   (2) so does an include of an upper layer's private header;
#   (3) a public header including a private one fails tests/scripts/check-layers.py, naming file and line
#       (it compiles inside libcore: the check the build cannot make);
#   (4) so does a raw MPI call outside the comm layer (in train, and in a tool), while the same
#       call in a comment, or inside comm, passes.
# The untouched copy builds and passes the check, before and after the plants.
# Usage: layering_planted.sh SRC WORK
# Only the base layer's library is built (libshardtrain_base.a, 15 files): with ccache (scripts/
# setup.sh's launcher, keyed on paths relative to the copy) they are cache hits of the real build.
set -euo pipefail
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
cp -r "$src/CMakeLists.txt" "$src/cmake" "$src/libcore" "$src/scripts" "$src/tools" "$src/man" "$work/"
build="$work/build"
launcher=()
if command -v ccache >/dev/null; then
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$work;ccache")
fi
cmake -S "$work" -B "$build" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DSHARDTRAIN_TESTS=OFF -DSHARDTRAIN_CUDA=OFF \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; echo "FAIL: the copy does not configure"; exit 1; }
build_base() { cmake --build "$build" --target libcore_base -j 2 2>&1; }
check() { python3 "$src/tests/scripts/check-layers.py" "$work"; }

build_base >"$work/clean.log" || { tail -30 "$work/clean.log"; echo "FAIL: the unmodified copy does not build"; exit 1; }
check >/dev/null || { echo "FAIL: the unmodified copy does not pass check-layers.py"; check; exit 1; }

# plant_build FILE INCLUDE_LINE: appends the include to FILE (relative to the copy), expects the
# build to fail with the compiler's "FILE:LINE:...: fatal error: <header>: No such file", then
# removes the include again.
plant_build() {
  local file=$1 include=$2 out header
  local line=$(($(wc -l <"$work/$file") + 1))
  header=$(sed 's/.*"\(.*\)".*/\1/' <<<"$include")
  echo "$include" >>"$work/$file"
  out=$(build_base) && { echo "FAIL: $file with $include built"; exit 1; }
  grep -F "$work/$file:$line:" <<<"$out" | grep -F "$header" | grep -F "No such file" ||
    { echo "$out" | tail -20; echo "FAIL: the build failed without naming $file:$line and $header"; exit 1; }
  sed -i '$d' "$work/$file"
}
# 1. base (the lowest layer) includes a train header.
plant_build libcore/src/base/log.cpp '#include "shardtrain/train/trainer.hpp"'
# 2. base includes a private header of train.
plant_build libcore/src/base/log.cpp '#include "train/job.hpp"'

# 3. a public header includes a private one: check-layers.py names it.
file=libcore/include/shardtrain/ckpt/read.hpp
line=$(($(wc -l <"$work/$file") + 1))
echo '#include "ckpt/internal.hpp"' >>"$work/$file"
out=$(check) && { echo "FAIL: $file including a private header passed check-layers.py"; exit 1; }
echo "$out"
grep -qF "$file:$line: public header includes the private header \"libcore/src/ckpt/internal.hpp\"" <<<"$out" ||
  { echo "FAIL: the message does not name $file:$line"; exit 1; }
sed -i '$d' "$work/$file"

# 4. raw MPI calls outside the comm layer: check-layers.py names each, file and line.
plant_mpi() {
  local file=$1 call=$2 line out
  line=$(($(wc -l <"$work/$file") + 1))
  echo "static int planted_mpi_call() { int n = 0; $call(MPI_COMM_WORLD, &n); return n; }" >>"$work/$file"
  out=$(check) && { echo "FAIL: $file calling $call passed check-layers.py"; exit 1; }
  echo "$out" | head -1
  grep -qF "$file:$line: calls $call outside the comm layer" <<<"$out" ||
    { echo "$out"; echo "FAIL: the message does not name $file:$line and $call"; exit 1; }
  sed -i '$d' "$work/$file"
}
plant_mpi libcore/src/train/job.cpp MPI_Comm_size
plant_mpi tools/ddp-train.cpp MPI_Comm_rank
for file in libcore/src/train/job.cpp libcore/src/comm/types.cpp; do  # a comment, and the comm layer: allowed
  echo '// MPI_Comm_size(MPI_COMM_WORLD, &n) would be refused as code' >>"$work/$file"
  [ "$file" = libcore/src/comm/types.cpp ] && echo 'static int allowed_in_comm() { int n = 0; MPI_Comm_size(MPI_COMM_WORLD, &n); return n; }' >>"$work/$file"
  check >/dev/null || { check; echo "FAIL: check-layers.py refused $file's comment or comm's own MPI call"; exit 1; }
done
sed -i '$d' "$work/libcore/src/train/job.cpp"
sed -i '$d' "$work/libcore/src/comm/types.cpp"; sed -i '$d' "$work/libcore/src/comm/types.cpp"

build_base >/dev/null || { echo "FAIL: the copy does not build again after the plants were removed"; exit 1; }
check >/dev/null || { echo "FAIL: the copy does not pass check-layers.py again after the plants were removed"; exit 1; }
echo "PASS: the build refused both upward includes naming the file, check-layers.py the private one and the raw MPI calls; the clean copy builds"
