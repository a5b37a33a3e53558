#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (issue 50; docs/RELIABILITY.md records the latest table).
#
#   scripts/fuzz.sh [SECONDS per target, default 60] [TARGET...]   (default: every target)
#   FUZZ_RUNS=N scripts/fuzz.sh SECONDS ...   each target stops at N executions or SECONDS, whichever
#                                             comes first (issue 50: 10 minutes or 1,000,000 executions)
#
# Builds them first through scripts/sanitize.sh (build-asan/: clang, ASan + UBSan + libFuzzer), then
# runs each target alone for SECONDS on one core, seeded from testdata/fuzz/<target>/ (the test
# fixtures' files and every input that ever crashed it) with the dictionary fuzz/dict/<target>.dict,
# with libFuzzer's limits: an input running past 10 s is a hang, a process past 2 GiB RSS or one
# allocation past 1 GiB is a finding (a reader must cap sizes before it allocates).
# New inputs that add coverage go to build-asan/fuzz/corpus/<target>/ (kept between runs); a
# finding is saved as build-asan/fuzz/findings/<target>/crash-* (or leak-, timeout-, oom-): copy
# it to testdata/fuzz/<target>/, where the ctest entry fuzz_replay_<target> replays it in every CI,
# and fix the reader. Prints one table row per target: executions, coverage (edges, features),
# findings. Exits 1 when any target found something. FUZZ_NO_BUILD=1 runs the binaries already built.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build="$here/build-asan"
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || SANITIZE_FUZZ_ONLY=1 "$here/scripts/sanitize.sh" address --build-only
bin="$build/fuzz/bin"
[ -d "$bin" ] || { echo "fuzz.sh: no libFuzzer targets in $bin (clang needed: CXX=clang++)" >&2; exit 2; }
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$here"/fuzz/targets/*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
supp="$here/sanitize"
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export OMPI_MCA_memory=^patcher
status=0
runs=()
[ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS")
printf '| target | seconds | executions | coverage (edges / features) | findings |\n|---|---|---|---|---|\n'
for t in "${targets[@]}"; do
  corpus="$build/fuzz/corpus/$t" findings="$build/fuzz/findings/$t" log="$build/fuzz/logs/$t.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  dict=()
  [ -f "$here/fuzz/dict/$t.dict" ] && dict=(-dict="$here/fuzz/dict/$t.dict")
  rc=0 started=$SECONDS
  "$bin/fuzz-$t" "$corpus" "$here/testdata/fuzz/$t" "${dict[@]}" "${runs[@]}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 | awk '{print $2 " / " $4}' || true)
  found=$(find "$findings" -type f | wc -l)
  [ "$rc" = 0 ] || [ "$found" -gt 0 ] || found="exit $rc (see $log)"
  printf '| %s | %s | %s | %s | %s |\n' "$t" "$((SECONDS - started))" "${execs:-?}" "${cov:-?}" "$found"
  [ "$rc" = 0 ] || status=1
done
exit $status
