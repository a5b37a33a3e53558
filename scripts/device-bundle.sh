#!/usr/bin/env bash
# device-bundle.sh: the Release CUDA (sm_90) build of this machine packed into ONE self-contained
# archive for a GPU machine that has only the CUDA driver, Python and NVIDIA's libraries (no Open MPI,
# HDF5, oneDNN, no package registry). The machine that runs it unpacks the archive and calls
# BUNDLE/launch or BUNDLE/gpu-check.sh (bin/gpu-check in the bundle's environment); nothing is built there.
#
# Usage: scripts/device-bundle.sh [--build DIR] [--out DIR] [--no-build] [--force] [--list]
#   --build DIR  the build folder (default: build, or $BUILD_DIR). It must be a Release build with the
#                CUDA backend (setup.sh makes one where nvcc is found); it is brought up to date
#                (cmake --build), never configured a second time.
#   --out DIR    where the archive goes (default: gpu-bundle, ignored by git)
#   --no-build   pack the build folder as it is (no cmake --build)
#   --force      repack even when the archive is newer than everything it holds
#   --list       print the archive's files after packing
# Output: OUT/shardtrain-gpu-bundle.tar.xz (at most 48 MiB, checked), holding shardtrain-gpu-bundle/:
#   bin/        the tools, Open MPI's orterun (mpirun), orted, ompi_info   RUNPATH $ORIGIN/../lib...
#   tests/      shardtrain_tests                                           RUNPATH $ORIGIN/../lib...
#   lib/        the ldd closure of all of them and of the Open MPI/PMIx components, minus glibc,
#               libstdc++, libgcc_s, the driver (libcuda) and the libraries the device provides
#               (cuBLAS, cuBLASLt, NCCL); libcudart is bundled (the driver does not provide it)
#   lib/stubs/  stand-ins for the provided libraries, used only where the device lacks them: they let
#               a CPU run start and stop the program with a message at the first call into them
#   lib/device/ filled at run time by `launch` with links to the provided libraries it found
#   lib/x86_64-linux-gnu/{openmpi,pmix2}/, share/openmpi/, etc/openmpi/   Open MPI's and PMIx's
#               components, help files and configuration, relocated with OPAL_PREFIX
#   data/       the fortunes dataset (scripts/prepare-data.sh)       testdata/  the test reference files
#   scripts/    prepare-data.sh (the data stage, when the dataset is missing)  gpu-check.sh (runs bin/gpu-check
#               through launch), launch, manifest.json
# The manifest (docs/FORMATS.md "Device bundle manifest") lists versions and the sha256 of every file.
# Exit status: 0 when the archive is written (or already up to date); 1 on a failure; 2 for usage.
# SC2015: `A && B || die` dies unless both hold; SC2012: tool and component names hold no spaces;
# SC2143, SC2028: a cache value tested for text, C source echoed with its escapes kept.
# shellcheck disable=SC2015,SC2012,SC2143,SC2028
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build}" out="$here/gpu-bundle" force=0 list=0 nobuild=0
name=shardtrain-gpu-bundle
max_bytes=$((48 * 1024 * 1024))
say() { echo "device-bundle.sh: $*" >&2; }
die() { say "$*"; exit "${2:-1}"; }
usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) [ $# -ge 2 ] || die "--build needs a folder" 2; build=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder" 2; out=$2; shift 2 ;;
    --force) force=1; shift ;;
    --no-build) nobuild=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" 2 ;;
  esac
done
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
archive="$out/$name.tar.xz"
for t in patchelf readelf xz sha256sum gcc; do
  command -v "$t" >/dev/null || die "$t is missing: scripts/setup.sh installs it (packages patchelf binutils xz-utils gcc)" 2
done

# ---- 1. the build: Release, CUDA for sm_90, up to date --------------------------------------------
cache="$build/CMakeCache.txt"
[ -f "$cache" ] || die "$build is not a configured build: run scripts/setup.sh first (CUDA AUTO finds nvcc)" 2
cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -1; }
[ "$(cache_get CMAKE_BUILD_TYPE)" = Release ] || die "$build is a $(cache_get CMAKE_BUILD_TYPE) build; the bundle needs Release (scripts/setup.sh)" 2
# A CUDA build: CMake recorded the CUDA compiler it enabled (the top-level file sets it, not the cache).
nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -1)
[ -n "$nvcc" ] && [ -x "$nvcc" ] || die "$build is a CPU-only build (no CUDA compiler): install the CUDA toolkit and rerun scripts/setup.sh" 2
# The architectures are the build's cache variable (top-level CMakeLists.txt; default "90").
case ";$(cache_get CMAKE_CUDA_ARCHITECTURES);" in
  *";90;"* | *";90-real;"* | *";90a;"*) ;;
  *) die "$build does not target sm_90 (CMAKE_CUDA_ARCHITECTURES=$(cache_get CMAKE_CUDA_ARCHITECTURES)); reconfigure with -DCMAKE_CUDA_ARCHITECTURES=90" 2 ;;
esac
tools=$(cd "$here/tools" && ls ./*.cpp | sed 's|^\./||; s|\.cpp$||')
if [ "$nobuild" = 0 ]; then
  say "bringing $build up to date (tools and shardtrain_tests)"
  # shellcheck disable=SC2086  # one target per tool
  cmake --build "$build" -j "${JOBS:-2}" --target $tools shardtrain_tests >"$build/device-bundle-build.log" 2>&1 ||
    { tail -30 "$build/device-bundle-build.log" >&2; die "the build failed (log: $build/device-bundle-build.log)"; }
fi
[ -n "$(cache_get SHARDTRAIN_NCCL_LIBRARY | grep -v NOTFOUND)" ] || say "note: this build has no NCCL transport (NCCL was not found)"
[ -f "$here/data/fortunes.h5" ] || DATA_DIR="$here/data" "$here/scripts/prepare-data.sh" "$build" >/dev/null

# ---- up to date? ------------------------------------------------------------------------------------
inputs=("$build/tests/shardtrain_tests" "$here/data/fortunes.h5" "$here/scripts/gpu-check.sh" "$here/scripts/bundle-launch.sh"
        "$here/scripts/device-bundle.sh" "$here/scripts/prepare-data.sh" "$here/testdata")
for t in $tools; do inputs+=("$build/bin/$t"); done
if [ "$force" = 0 ] && [ -f "$archive" ] && [ -z "$(find "${inputs[@]}" -newer "$archive" -print -quit)" ]; then
  say "$archive is up to date ($(du -h "$archive" | cut -f1)); --force repacks"
  echo "$archive"
  exit 0
fi

# ---- 2. the stage folder ------------------------------------------------------------------------------
mkdir -p "$out"
stage=$(mktemp -d "$out/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
B="$stage/$name"
mkdir -p "$B"/{bin,tests,lib/stubs,lib/device,data,scripts}
for t in $tools; do cp "$build/bin/$t" "$B/bin/"; done
cp "$build/tests/shardtrain_tests" "$B/tests/"
cp "$here/data/fortunes.h5" "$B/data/"
cp -r "$here/testdata" "$B/testdata"
cp "$here/scripts/gpu-check.sh" "$B/gpu-check.sh"
cp "$here/scripts/bundle-launch.sh" "$B/launch"
cp "$here/scripts/prepare-data.sh" "$B/scripts/"  # gpu-check's data stage, when the dataset is missing
chmod +x "$B/gpu-check.sh" "$B/launch"

# Open MPI 4.1 (Debian: prefix /usr, libdir lib/x86_64-linux-gnu/openmpi/lib, pkglibdir .../openmpi3,
# data /usr/share/openmpi, sysconfdir /etc/openmpi) and its external PMIx (prefix .../pmix2). The
# bundle mirrors those folders under its own root so that OPAL_PREFIX=BUNDLE relocates them.
mpirun_real=$(readlink -f "$(command -v mpirun)")
[ "$(basename "$mpirun_real")" = orterun ] || die "mpirun is $mpirun_real, not Open MPI 4's orterun: the bundle expects Debian's openmpi-bin 4.1"
ompi_libdir=/usr/lib/x86_64-linux-gnu/openmpi/lib
pmix_dir=/usr/lib/x86_64-linux-gnu/pmix2
[ -d "$ompi_libdir/openmpi3" ] && [ -d "$pmix_dir/lib/pmix" ] || die "Open MPI's components are not where Debian's 4.1 keeps them ($ompi_libdir/openmpi3, $pmix_dir/lib/pmix)"
cp "$mpirun_real" "$B/bin/orterun"
ln -s orterun "$B/bin/mpirun"
ln -s orterun "$B/bin/mpiexec"
for t in orted ompi_info; do cp "$(command -v $t)" "$B/bin/"; done
mkdir -p "$B/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" "$B/lib/x86_64-linux-gnu/pmix2/lib/pmix" "$B/share" "$B/etc"
# Components whose closure needs a network stack a one-node run does not use (UCX, libfabric, PSM,
# verbs, Java) stay out: Open MPI then picks its shared-memory and TCP transports (vader, tcp).
heavy='lib(ucp|ucs|uct|ucm|fabric|psm|psm2|psm_infinipath|ibverbs|rdmacm|jvm|mpi_java|mca_common_(ucx|ofi|verbs))'
dropped=()
for c in "$ompi_libdir"/openmpi3/*.so; do
  deps=$(ldd "$c" 2>&1 || true)  # whole, then matched: grep -q on a pipe would race pipefail
  if grep -qE "$heavy|not found" <<<"$deps"; then dropped+=("$(basename "$c" .so)"); continue; fi
  cp "$c" "$B/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/"
done
cp "$pmix_dir"/lib/pmix/*.so "$B/lib/x86_64-linux-gnu/pmix2/lib/pmix/"
cp -r "$pmix_dir/share" "$B/lib/x86_64-linux-gnu/pmix2/share"
# Debian's PMIx configuration names its component folder by absolute path; `launch` sets it instead.
sed -i 's|^mca_base_component_path *=|# (set by launch) &|' "$B/lib/x86_64-linux-gnu/pmix2/share/pmix-mca-params.conf"
cp -r /usr/share/openmpi "$B/share/openmpi"
cp -r /etc/openmpi "$B/etc/openmpi"
say "[$SECONDS s] Open MPI: $(ls "$B/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" | wc -l) components bundled, ${#dropped[@]} left out (${dropped[*]})"

# ---- 3. the library closure -------------------------------------------------------------------------
# Provided by the device (or by every Linux): glibc, the C++ runtime, the driver, cuBLAS(Lt), NCCL.
system_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libnsl|libanl|libstdc\+\+|libgcc_s|libcuda)\.so'
provided_re='^(libcublas|libcublasLt|libnccl)\.so'
elfs=()
is_elf() { [ "$(od -An -tx1 -N4 "$1" | tr -d ' \n')" = 7f454c46 ]; }
while IFS= read -r f; do is_elf "$f" && elfs+=("$f"); done < <(find "$B/bin" "$B/tests" "$B/lib" -type f | sort)
declare -A seen=() provided=()
for f in "${elfs[@]}"; do
  while read -r soname _ path _; do
    [ -n "$soname" ] || continue
    if [[ "$soname" =~ $provided_re ]]; then provided[$soname]=$path; continue; fi
    [[ "$soname" =~ $system_re ]] && continue
    [ "$path" = "not" ] && die "$(basename "$f"): $soname not found on this machine (ldd)"
    [[ "$path" == /* ]] || continue
    seen[$soname]=$path
  done < <(ldd "$f" | grep '=>')
done
for soname in "${!seen[@]}"; do cp -L "${seen[$soname]}" "$B/lib/$soname"; done
say "[$SECONDS s] closure: ${#seen[@]} libraries bundled; provided by the device: ${!provided[*]}"

# Stand-ins for the provided libraries: the same soname and symbol versions, every function the
# bundled programs import from it, each printing what is missing and exiting 3. They sit last on the
# run path, so a real library linked into lib/device/ by `launch` always wins.
for f in "${elfs[@]}"; do readelf -W --dyn-syms "$f" | awk '$7 == "UND" {print $8}'; done |
  sed 's/@.*//' | sort -u >"$stage/wanted"
for soname in "${!provided[@]}"; do
  real=${provided[$soname]}
  src="$stage/stub-$soname.c" map="$stage/stub-$soname.map"
  # name@@VERSION of every function the real library defines and some bundled program imports.
  readelf -W --dyn-syms "$real" | awk '$7 != "UND" && ($4 == "FUNC" || $4 == "IFUNC") {print $8}' | sort -u >"$stage/defs"
  awk -F'@@?' 'NR == FNR {want[$1] = 1; next} ($1 in want) {print $1, ($2 == "" ? "" : $2)}' "$stage/wanted" "$stage/defs" |
    sort -u >"$stage/syms"
  {
    echo "/* Stand-in for $soname, made by scripts/device-bundle.sh: not the real library. */"
    echo '#include <stdio.h>'
    echo '#include <stdlib.h>'
    echo "static void stop(const char* f) { fprintf(stderr, \"shardtrain bundle: %s called, but $soname is not on this machine (the bundle's stand-in answered); run BUNDLE/launch --report\\n\", f); exit(3); }"
    awk '{printf "int %s(void) { stop(\"%s\"); return 1; }\n", $1, $1}' "$stage/syms"
  } >"$src"
  {
    awk '$2 != "" {v[$2] = v[$2] "  " $1 ";\n"} END {for (k in v) printf "%s {\n global:\n%s};\n", k, v[k]}' "$stage/syms"
    if awk '$2 == "" {found = 1} END {exit !found}' "$stage/syms"; then
      echo "{ global:"; awk '$2 == "" {print "  " $1 ";"}' "$stage/syms"; echo "  local: *; };"
    fi
  } >"$map"
  versions=()
  [ -s "$map" ] && versions=("-Wl,--version-script=$map")  # nothing imported: the soname alone
  gcc -shared -fPIC -O1 -w -o "$B/lib/stubs/$soname" -Wl,-soname,"$soname" "${versions[@]+"${versions[@]}"}" "$src" ||
    die "could not make the stand-in for $soname"
  echo "$soname $(wc -l <"$stage/syms") $real" >>"$B/lib/stubs/README"
done
printf '%s\n' "${!provided[@]}" | sort >"$B/lib/device-libs.txt"
# The vector extensions of this processor, which -march=native (SHARDTRAIN_NATIVE) may have used:
# `launch` warns when the running machine lacks one (the program would die with SIGILL).
if [ "$(cache_get SHARDTRAIN_NATIVE)" = ON ]; then
  grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|amx|fma|bmi|f16c|sse4)' | sort >"$B/lib/build-cpu-flags.txt"
fi

# ---- 4. run paths: $ORIGIN-relative everywhere, nothing from the caller's environment ------------------
# Programs: lib/device (real provided libraries) first, then lib, then lib/stubs. Libraries: the same,
# relative to lib/. Components: relative to their folders.
to_lib() {  # FOLDER (inside the bundle): the relative path from it to BUNDLE/lib
  local d=${1#"$B"/} up=""
  if [ "$d" = lib ]; then echo .; return; fi
  case "$d" in lib/*) d=${d#lib/}; local x=${d//[!\/]/}; up=$(printf '../%.0s' $(seq $((${#x} + 1)))); echo "${up%/}" ;;
               *) local x=${d//[!\/]/}; up=$(printf '../%.0s' $(seq $((${#x} + 1)))); echo "${up}lib" ;; esac
}
for f in "${elfs[@]}" "$B"/lib/*.so*; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  r=$(to_lib "$(dirname "$f")")
  rp="\$ORIGIN/$r/device:\$ORIGIN/$r:\$ORIGIN/$r/stubs"
  [ "$r" = . ] && rp="\$ORIGIN/device:\$ORIGIN:\$ORIGIN/stubs"
  patchelf --set-rpath "$rp" --force-rpath "$f" 2>/dev/null || patchelf --set-rpath "$rp" "$f"
  # --force-rpath writes DT_RPATH, which (unlike RUNPATH) also serves the libraries a library loads,
  # so a component's dependency chain resolves inside the bundle too.
done
chmod -R u+w "$B"
say "[$SECONDS s] run paths set"

# ---- 5. manifest ------------------------------------------------------------------------------------
# gpu-check writes it (deviceproof/bundle_manifest.hpp), the same module whose reader checks it on the device.
printf '%s\n' "${dropped[@]+"${dropped[@]}"}" >"$stage/dropped.txt"
"$build/bin/gpu-check" manifest "$B" --build "$build" --source "$here" --dropped "$stage/dropped.txt" --nvcc "$nvcc" \
  --cudart "$(readlink -f "${seen[libcudart.so.13]:-none}")" || die "could not write the manifest"

# ---- 6. the archive ---------------------------------------------------------------------------------
tmp="$archive.tmp"
tar -C "$stage" --owner=0 --group=0 --sort=name -cf - "$name" | xz -T "${JOBS:-2}" -6 >"$tmp"
bytes=$(stat -c %s "$tmp")
if [ "$bytes" -gt "$max_bytes" ]; then
  rm -f "$tmp"
  die "the archive is $((bytes / 1024 / 1024)) MiB, over the 48 MiB limit"
fi
mv "$tmp" "$archive"
count=$(tar -tJf "$archive" | grep -vc '/$')
say "[$SECONDS s] wrote $archive: $(numfmt --to=iec-i --suffix=B "$bytes") ($bytes bytes), $count files"
[ "$list" = 1 ] && tar -tvJf "$archive" >&2
echo "$archive"
