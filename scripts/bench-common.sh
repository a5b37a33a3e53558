# Shared preamble of the benchmark scripts (sourced, not run): strict mode, paths, Open MPI as
# root, a build and the bundled data (set up when missing), a scratch folder removed at exit, the
# foundation benchmark configuration, a JSON field reader, arithmetic, and the figures module.
#   here, build, peer, tmp, foundation=(...), json FILE 'JQ FILTER', calc 'EXPR', figures NAME ARGS,
#   use_gpt2_small, need_torch_peer, kill_after_step
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)"
build="${BUILD_DIR:-$here/build}"
peer="${PEER:-$here/bench/torch_peer.py}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ -x "$build/bin/ddp-train" ] && [ -x "$build/bin/fsdp-train" ] && [ -f "$here/data/fortunes.h5" ] ||
  "$here/scripts/setup.sh"
tmp="$(mktemp -d "${TMPDIR:-/var/tmp}/shardtrain-bench.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# The foundation benchmark configuration (issue 2): one thread per rank, micro-batch 8.
foundation=(--data "$here/data/fortunes.h5" --layers 4 --d-model 256 --heads 4 --seq-len 256 --micro-batch 8
            --threads 1 --log-every 1000)
# GPT-2 small's shape for the scripts that take MODEL=gpt2-small (sets gpt2_small=(...): a synthetic
# corpus at GPT-2's vocabulary made in $tmp, --model gpt2-small, micro-batch 1, one thread); any other
# non-empty MODEL stops the script (exit 2). Returns 1 when MODEL is unset (the foundation configuration).
use_gpt2_small() {
  case "${MODEL:-}" in
    "") return 1 ;;
    gpt2-small) ;;
    *) echo "$(basename "$0"): MODEL is gpt2-small or unset (the foundation configuration), not '$MODEL'" >&2; exit 2 ;;
  esac
  "$build/bin/data-prep" --synthetic markov --symbols 50256 --documents 4 --doc-tokens 3000 -o "$tmp/gpt2-vocab.h5" \
    >/dev/null
  gpt2_small=(--data "$tmp/gpt2-vocab.h5" --model gpt2-small --micro-batch 1 --threads 1 --log-every 1000)
}
# json FILE FILTER: the value of a jq filter over FILE (e.g. '.median_step_s * 1000'); fails on null.
json() { jq -er "$2" "$1"; }
# calc EXPR: a floating-point expression of numbers the script read (awk's arithmetic), e.g. calc "$a / $b".
calc() { awk "BEGIN { printf \"%.12g\\n\", $* }"; }
# figures NAME ARGS...: a script's closing computation (scripts/lib/figures.py --help lists them).
figures() { python3 "$here/scripts/lib/figures.py" "$@"; }
# The PyTorch peer needs Debian's python3-torch and an optimised BLAS: installs them when missing (as
# root), else stops with the command to run. A script that runs the peer calls this first.
need_torch_peer() {
  [ -f "$peer" ] || { echo "$(basename "$0"): the PyTorch peer $peer is missing; set PEER=path/to/a/peer.py" >&2; exit 2; }
  /usr/bin/python3 -c "import torch" 2>/dev/null && dpkg-query -W libopenblas0-pthread >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "$(basename "$0"): the PyTorch peer needs: sudo apt-get install -y python3-torch libopenblas0-pthread" >&2
    exit 2
  fi
  echo "$(basename "$0"): installing python3-torch libopenblas0-pthread for the PyTorch peer" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch libopenblas0-pthread >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch libopenblas0-pthread >/dev/null; }
}
# kill_after_step STEP_LOG STEP: SIGKILLs the process that writes STEP_LOG (a steps.rank<R>.jsonl:
# its records carry the pid) once a step >= STEP is logged; gives up after 10 minutes. Run it in
# the background beside the job.
kill_after_step() {
  local log=$1 at=$2 step pid
  for _ in $(seq 1 6000); do
    if [ -s "$log" ]; then
      read -r step pid < <(tail -n 1 "$log" | jq -r '"\(.step) \(.pid)"')
      if [ "$step" -ge "$at" ]; then kill -9 "$pid"; return 0; fi
    fi
    sleep 0.1
  done
}
