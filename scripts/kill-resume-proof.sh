#!/usr/bin/env bash
# The kill-and-resume proof's old name, kept for scripts that call it: runs the kill-resume-proof
# program (tools/kill-resume-proof.cpp, kill-resume-proof(1)) with the same options. The program is
# taken from --bin DIR when given (the build whose tools the proof runs), else $SHARDTRAIN_BIN, the
# clone's build (BUILD_DIR, default build/), then PATH.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dirs=("${SHARDTRAIN_BIN:-}" "${BUILD_DIR:-$here/build}/bin")
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --bin ] && dirs=("${args[i+1]:-}" "${dirs[@]}"); done
for bin in "${dirs[@]}"; do
  if [ -n "$bin" ] && [ -x "$bin/kill-resume-proof" ]; then exec "$bin/kill-resume-proof" "$@"; fi
done
if command -v kill-resume-proof >/dev/null; then exec kill-resume-proof "$@"; fi
echo "kill-resume-proof.sh: the kill-resume-proof program is not built (run scripts/setup.sh, or set SHARDTRAIN_BIN)" >&2
exit 2
