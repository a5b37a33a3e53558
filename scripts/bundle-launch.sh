#!/usr/bin/env bash
# launch: the entry point of the shardtrain device bundle (scripts/device-bundle.sh copies this file
# to BUNDLE/launch). It finds the libraries the bundle leaves to the GPU machine (cuBLAS, cuBLASLt,
# NCCL: lib/device-libs.txt names their sonames), links the ones it finds into BUNDLE/lib/device/
# (first on every bundled program's $ORIGIN-relative run path), says which it used, and runs a
# command with Open MPI relocated to the bundle (OPAL_PREFIX).
#
# Usage: BUNDLE/launch --report          link and print the library report (exit 0)
#        BUNDLE/launch --env             the same quietly, then print the environment as export lines
#        BUNDLE/launch COMMAND [ARGS...] link quietly (the report goes to stderr with --verbose first),
#                                        then exec COMMAND with BUNDLE/bin first on PATH
# Search order for each library (the first folder holding the soname wins):
#   1. SHARDTRAIN_CUDA_LIBS (folders separated by ':')
#   2. the CUDA toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, /usr/local/cuda-*
#      (lib64, lib, targets/x86_64-linux/lib)
#   3. Python packages: nvidia/*/lib under every site-packages/dist-packages folder that python3
#      reports, and under /usr/lib/python3*, /usr/local/lib/python3*, /opt/*/lib/python3*, /opt/*/.venv
#   4. the dynamic linker's cache (ldconfig -p)
# A library not found stays unlinked: the bundle's stand-in (lib/stubs/) then lets CPU runs start and
# stops a program that calls into it, with a message. The driver (libcuda.so.1) is never bundled.
set -euo pipefail

bundle=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
mode=exec verbose=0
case "${1:-}" in
  --report) mode=report ;;
  --env) mode="env" ;;
  --verbose) verbose=1; shift ;;
  -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") echo "launch: give --report, --env or a command (see --help)" >&2; exit 2 ;;
esac

# ---- candidate folders, in order, each with where it came from -----------------------------------
dirs=() whence=()
add() { [ -d "$1" ] || return 0; local d; d=$(cd "$1" && pwd -P); local x
        for x in "${dirs[@]+"${dirs[@]}"}"; do [ "$x" = "$d" ] && return 0; done; dirs+=("$d"); whence+=("$2"); }
IFS=: read -r -a extra <<<"${SHARDTRAIN_CUDA_LIBS:-}"
for d in "${extra[@]+"${extra[@]}"}"; do [ -n "$d" ] && add "$d" "SHARDTRAIN_CUDA_LIBS"; done
for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
  [ -n "$root" ] || continue
  for sub in lib64 lib targets/x86_64-linux/lib; do add "$root/$sub" "CUDA toolkit"; done
done
sites=()
if command -v python3 >/dev/null 2>&1; then
  while IFS= read -r s; do sites+=("$s"); done < <(python3 -c 'import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path: print(p)' 2>/dev/null || true)
fi
shopt -s nullglob
sites+=(/usr/lib/python3*/*-packages /usr/local/lib/python3*/*-packages /opt/*/lib/python3*/*-packages
        /opt/*/.venv/lib/python3*/*-packages)
for s in "${sites[@]+"${sites[@]}"}"; do
  for d in "$s"/nvidia/*/lib; do add "$d" "Python package $(basename "$(dirname "$d")") ($s)"; done
done
shopt -u nullglob

# ---- link what is found ----------------------------------------------------------------------------
mkdir -p "$bundle/lib/device"
rm -f "$bundle/lib/device/"*
report=() missing=0 found=0
while read -r soname; do
  [ -n "$soname" ] || continue
  hit="" from=""
  for i in "${!dirs[@]}"; do
    if [ -e "${dirs[$i]}/$soname" ]; then hit="${dirs[$i]}/$soname" from="${whence[$i]}"; break; fi
  done
  if [ -z "$hit" ] && command -v ldconfig >/dev/null 2>&1; then
    hit=$(ldconfig -p 2>/dev/null | awk -v s="$soname" '$1 == s && !h {h = $NF} END {print h}' || true) from="ldconfig cache"
  fi
  if [ -n "$hit" ]; then
    ln -sf "$hit" "$bundle/lib/device/$soname"
    report+=("$(printf '  %-20s %s  [%s]' "$soname" "$(readlink -f "$hit")" "$from")")
    found=$((found + 1))
  else
    report+=("$(printf '  %-20s NOT FOUND: the stand-in is used (CPU runs work; a call into it stops the program)' "$soname")")
    missing=$((missing + 1))
  fi
done <"$bundle/lib/device-libs.txt"

# Each variable this sets, in order: what --env prints.
set_vars=()
put() { export "$1=$2"; set_vars+=("$1"); }

# The driver: the bundled CUDA runtime loads libcuda.so.1 through the usual search; a driver folder
# the linker's cache does not know is added to LD_LIBRARY_PATH (for libcuda only: nothing the bundle
# holds is there).
driver=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" && !h {h = $NF} END {print h}' || true)
if [ -z "$driver" ]; then
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib; do
    if [ -e "$d/libcuda.so.1" ]; then driver="$d/libcuda.so.1"; put LD_LIBRARY_PATH "$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; break; fi
  done
fi

print_report() {
  echo "shardtrain bundle $bundle: device libraries (${#dirs[@]} folders searched)"
  printf '%s\n' "${report[@]}"
  if [ "$found" -eq 0 ]; then
    echo "  NO CUDA LIBRARIES FOUND: cuBLAS, cuBLASLt and NCCL are not on this machine; CPU runs only (--device cpu)."
    echo "  Searched: ${dirs[*]:-(no CUDA toolkit or Python nvidia packages present)}; set SHARDTRAIN_CUDA_LIBS to add folders."
  elif [ "$missing" -gt 0 ]; then
    echo "  $missing of $((found + missing)) not found: GPU runs that need them stop with a message."
  else
    echo "  all $found found."
  fi
  echo "  CUDA driver (libcuda.so.1): ${driver:-NOT FOUND (no GPU runs possible)}"
  echo "  CUDA runtime: bundled ($(cd "$bundle/lib" && ls libcudart.so.* 2>/dev/null | head -1))"
  if [ -f "$bundle/lib/build-cpu-flags.txt" ]; then
    local have lack=()
    have=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    while read -r f; do [[ "$have" == *" $f "* ]] || lack+=("$f"); done <"$bundle/lib/build-cpu-flags.txt"
    if [ "${#lack[@]}" -gt 0 ]; then
      echo "  WARNING: built with -march=native on a processor with ${lack[*]}, which this one lacks: a program may die with SIGILL (rebuild with SHARDTRAIN_NATIVE=OFF)"
    else
      echo "  processor: has every vector extension of the build machine"
    fi
  fi
}

# Open MPI and PMIx relocated into the bundle; root allowed (the GPU machine runs commands as root).
put OPAL_PREFIX "$bundle"; put OPAL_SYSCONFDIR "$bundle/etc/openmpi"
pmix="$bundle/lib/x86_64-linux-gnu/pmix2"
put PMIX_PREFIX "$pmix"; put PMIX_PKGLIBDIR "$pmix/lib/pmix"; put PMIX_PKGDATADIR "$pmix/share/pmix"
put PMIX_SYSCONFDIR "$pmix/share"; put PMIX_MCA_mca_base_component_path "$pmix/lib/pmix"
put HWLOC_PLUGINS_PATH "$bundle/lib/hwloc"  # none bundled: keep the machine's own hwloc plugins out
put OMPI_ALLOW_RUN_AS_ROOT "${OMPI_ALLOW_RUN_AS_ROOT:-1}"; put OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
put OMPI_MCA_btl_base_warn_component_unused 0
# mpirun refuses to start without an ssh or rsh client even for ranks on this machine only; a GPU
# image has none. With `false` as the agent one-node jobs run and a remote launch fails at once.
if ! command -v ssh >/dev/null 2>&1 && ! command -v rsh >/dev/null 2>&1; then
  put OMPI_MCA_plm_rsh_agent "${OMPI_MCA_plm_rsh_agent:-false}"
fi
put PATH "$bundle/bin:$PATH"; put SHARDTRAIN_BUNDLE "$bundle"

case "$mode" in
  report) print_report ;;
  env) for v in "${set_vars[@]}"; do printf 'export %s=%q\n' "$v" "${!v}"; done ;;
  exec)
    [ "$verbose" = 1 ] && print_report >&2
    [ $# -gt 0 ] || { echo "launch: no command given" >&2; exit 2; }
    exec "$@"
    ;;
esac
