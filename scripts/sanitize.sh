#!/usr/bin/env bash
# The suite under sanitizers (issue 50; docs/RELIABILITY.md records the latest result).
#
#   scripts/sanitize.sh [address|thread] [--build-only] [extra ctest arguments]
#
# address (default): build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer (and, with
#   clang, the libFuzzer targets of fuzz/ that scripts/fuzz.sh runs); runs the unit tests, the mpi
#   tests, the fuzz replay and the end-to-end tests named by SANITIZE_E2E.
# thread: build-tsan/ with ThreadSanitizer; runs the comm engine's cases (its progress thread shares
#   the queues, the flight recorder and the buffers with the callers) at 1 and 2 ranks.
# Every report is fatal (the process exits non-zero, so the test fails). The only suppressions are
# for third-party libraries, each with its reason, in sanitize/*.supp.
#
# Environment: JOBS (build jobs, default 2), CXX (default clang++ where installed, else g++),
# SANITIZE_E2E (a ctest -R regex of the e2e entries to run; default below), SANITIZE_FUZZ_ONLY=1 (build
# only libcore and the fuzz targets: scripts/fuzz.sh).
# A first build is cold (other flags than build/: no ccache hits) and takes 10+ minutes on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=address
if [ $# -gt 0 ] && { [ "$1" = address ] || [ "$1" = thread ]; }; then mode=$1; shift; fi
build_only=0
if [ $# -gt 0 ] && [ "$1" = --build-only ]; then build_only=1; shift; fi
jobs="${JOBS:-2}"
say() { echo "sanitize.sh: $*" >&2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ -z "${CXX:-}" ]; then
  if command -v clang++ >/dev/null; then CXX=clang++; CC=clang; else CXX=g++; CC=gcc; fi
fi
CC="${CC:-$( [ "$(basename "$CXX")" = g++ ] && echo gcc || echo clang)}"
case "$mode" in
  address) build="$here/build-asan"; sanitizers=address,undefined ;;
  thread)  build="$here/build-tsan"; sanitizers=thread ;;
esac
fuzz=OFF
# libFuzzer's instrumentation rides on the address build when the compiler is clang.
if [ "$mode" = address ] && "$CXX" --version | grep -q clang; then fuzz=ON; fi
# -O1 and line tables only: a quick build with usable stacks; NDEBUG is left out, so assert()s check too.
flags="-O1 -g1"
"$CXX" --version | grep -q clang && flags="-O1 -gline-tables-only"
launcher=()
if command -v ccache >/dev/null; then launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$here;ccache"); fi
mkdir -p "$build"
say "configuring $build ($sanitizers, $CXX, libFuzzer targets $fuzz)"
cmake -S "$here" -B "$build" "${launcher[@]}" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_C_COMPILER="$CC" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
  -DSHARDTRAIN_CUDA=OFF -DSHARDTRAIN_SANITIZE="$sanitizers" -DSHARDTRAIN_FUZZ=$fuzz \
  >"$build/sanitize-configure.log" 2>&1 || { cat "$build/sanitize-configure.log" >&2; exit 1; }

# Only what the chosen tests run: the test binary, its helpers, the tools of the e2e scripts; the
# fuzz targets first (scripts/fuzz.sh needs only them and libcore).
target_sets=()
if [ "$mode" = address ]; then
  [ "$fuzz" = ON ] && target_sets+=("fuzz_targets fuzz_replay")
  # The unit tests run every tool (--help against the man pages, bad options, the subcommands).
  target_sets+=("shardtrain_tests comm_hang_helper fuzz_replay data-prep ddp-train fsdp-train equiv-check hang-diagnose ckpt-reshard gpu-check kill-resume-proof pipeline release-gate run-resilient scale-bench")
else
  target_sets+=("shardtrain_tests")
fi
for set in "${target_sets[@]}"; do
  read -r -a targets <<<"$set"
  say "building ${targets[*]} (-j$jobs; log: $build/sanitize-build.log)"
  cmake --build "$build" -j "$jobs" --target "${targets[@]}" >>"$build/sanitize-build.log" 2>&1 ||
    { tail -40 "$build/sanitize-build.log" >&2; exit 1; }
  # fuzz.sh asks for the fuzz targets alone (SANITIZE_FUZZ_ONLY=1).
  [ "${SANITIZE_FUZZ_ONLY:-0}" = 1 ] && break
done
[ "$build_only" = 1 ] && exit 0

supp="$here/sanitize"
# Open MPI's components stay mapped to the end, so that LeakSanitizer can name (and lsan.supp
# suppress) what they keep for the process's life: sanitize/keep_modules.c says why.
"${CC}" -shared -fPIC -O1 -o "$build/libkeep_modules.so" "$supp/keep_modules.c"
export LD_PRELOAD="$build/libkeep_modules.so${LD_PRELOAD:+:$LD_PRELOAD}"
# abort_on_error: a report ends the process like a crash (ctest sees it fail); detect_leaks on.
# fast_unwind_on_malloc=0: third-party code built without frame pointers (glibc's vasprintf called by
# Open MPI) cuts the fast unwinder's stacks short, and a cut stack names no library to suppress.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
# Tests whose figures a sanitizer distorts (a resident peak against a budget) read this and say so.
export SHARDTRAIN_SANITIZER="$mode"
# Open MPI's memory hooks (the patcher component) rewrite malloc's neighbours and fight ASan's.
export OMPI_MCA_memory=^patcher

cd "$build"
status=0
if [ "$mode" = address ]; then
  e2e="${SANITIZE_E2E:-^(hang_diagnose_cli|ckpt_resume|ddp_faults|zero_equivalence)$}"
  say "ctest -L unit, -L mpi, and the e2e entries matching $e2e"
  ctest --output-on-failure -j "$jobs" -L 'unit|mpi' -LE gpu "$@" || status=1
  ctest --output-on-failure -j "$jobs" -R "$e2e" "$@" || status=1
else
  say "the comm engine's cases under ThreadSanitizer at 1 and 2 ranks"
  tests/shardtrain_tests "[comm]~[mpi]" || status=1
  mpirun -np 2 --oversubscribe tests/shardtrain_tests "[mpi][comm]" || status=1
fi
say "$([ $status = 0 ] && echo "passed: no sanitizer report" || echo "FAILED: see the reports above")"
exit $status
