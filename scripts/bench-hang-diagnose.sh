#!/usr/bin/env bash
# Benchmark (not a test): "hang-diagnose reads 8 dumps of 2,000 entries each in under a second".
# Generates 8 flight records (format_version 3) of 2,000 entries each in a temporary directory with
# scripts/lib/figures.py make-flight-records (two groups, dp and tp, 1,000 entries each; rank 5 one
# collective behind in dp, so the whole analysis runs), times `hang-diagnose --json` on them and prints the seconds (best of 3).
#
# Usage: scripts/bench-hang-diagnose.sh [BIN_DIR]   (default: build/bin)
set -euo pipefail
BIN_DIR=${1:-build/bin}
TOOL="$BIN_DIR/hang-diagnose"
[ -x "$TOOL" ] || { echo "no $TOOL (build the hang-diagnose target, or pass BIN_DIR)" >&2; exit 2; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

python3 "$(dirname "${BASH_SOURCE[0]}")/lib/figures.py" make-flight-records "$DIR"

best=""  # ns
for _ in 1 2 3; do
  start=$(date +%s%N)
  "$TOOL" --json "$DIR" >/dev/null || [ $? -eq 1 ]  # exit 1: the planted hang was found
  took=$(( $(date +%s%N) - start ))
  if [ -z "$best" ] || ((took < best)); then best=$took; fi
done
ms=$(( (best + 500000) / 1000000 ))
printf 'hang-diagnose --json: 8 dumps x 2000 entries: %d.%03d s (best of 3)\n' $((ms / 1000)) $((ms % 1000))
