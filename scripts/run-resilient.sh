#!/usr/bin/env bash
# The resilient launcher's old name, kept for job scripts that call it: runs the run-resilient
# program (tools/run-resilient.cpp, run-resilient(1)) with the same options. It looks in
# $SHARDTRAIN_BIN, then the clone's build (BUILD_DIR, default build/), then PATH.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for bin in "${SHARDTRAIN_BIN:-}" "${BUILD_DIR:-$here/build}/bin"; do
  if [ -n "$bin" ] && [ -x "$bin/run-resilient" ]; then exec "$bin/run-resilient" "$@"; fi
done
if command -v run-resilient >/dev/null; then exec run-resilient "$@"; fi
echo "run-resilient.sh: the run-resilient program is not built (run scripts/setup.sh, or set SHARDTRAIN_BIN)" >&2
exit 2
