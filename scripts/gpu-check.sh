#!/usr/bin/env bash
# gpu-check.sh: the entry of gpu-check(1), the device proof (docs/RUNBOOK.md "GPUs"; every option is
# the tool's: --part, --only, --list, --dry-run). In the device bundle (scripts/device-bundle.sh
# copies this file to its root, beside manifest.json and launch) it runs BUNDLE/bin/gpu-check in the
# bundle's environment (launch: Open MPI relocated, the device's libraries linked); in the clone,
# the build's tool (GPU_CHECK, default build/bin/gpu-check).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -f "$here/manifest.json" ] && [ -x "$here/launch" ]; then exec "$here/launch" gpu-check "$@"; fi
tool="${GPU_CHECK:-$here/../build/bin/gpu-check}"
[ -x "$tool" ] || { echo "gpu-check.sh: $tool missing: build it (cmake --build build --target gpu-check)" >&2; exit 2; }
exec "$tool" "$@"
