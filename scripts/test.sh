#!/usr/bin/env bash
# Runs the whole test suite: set-up (install, build, data), then ctest. Prints ctest's summary;
# exits non-zero on any failure. GPU-only tests report "Skipped" with the reason where there is
# no CUDA device.
#
# Usage: scripts/test.sh [extra ctest arguments, e.g. -R reference]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/scripts/setup.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build="${BUILD_DIR:-$here/build}"
cd "$build"
# Say up front why the GPU tests will show as skipped (ctest prints only "Skipped").
gate=$("$build/tests/shardtrain_tests" "[gpu]" 2>&1 | head -1) || true
case "$gate" in SKIPPED*) echo "test.sh: $gate" ;; esac
ctest --output-on-failure -j "${JOBS:-2}" "$@"
