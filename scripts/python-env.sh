#!/usr/bin/env bash
# The cached Python environments of the project, made OUTSIDE the clone so a second run installs nothing:
#   hf    (default) the Hugging Face tests' (tests/scripts/hf_roundtrip.sh): PyTorch (CPU) and transformers;
#   peer  the benchmark peer's (bench/specs/peer.json, bench/torch_peer.py): PyTorch 2.x from PyPI, the
#         release users install, with scaled_dot_product_attention and torch.compile;
#   tensorboard  the TensorBoard events test's (tests/scripts/tensorboard_events.sh): the tensorboard
#         package from PyPI, whose own event-file reader checks what the trainers write.
#
# Usage: scripts/python-env.sh [hf|peer|tensorboard]   prints the environment's python on standard output (exit 0),
#                                          or why it cannot be had on standard error (exit 77: a test skips)
# Environment: SHARDTRAIN_PY_ENV (the hf folder, default ${XDG_CACHE_HOME:-$HOME/.cache}/shardtrain/venv-hf1),
#              SHARDTRAIN_PEER_ENV (the peer folder, default ${XDG_CACHE_HOME:-$HOME/.cache}/shardtrain/venv-torch2),
#              SHARDTRAIN_TORCH_INDEX (peer: a pip index URL to take torch from, e.g. PyTorch's own CPU-only
#              wheel index, about 200 MB; default: PyPI, whose Linux wheel is the CUDA build: about 3 GB with
#              its NVIDIA packages, 5.4 GB installed, and it runs on a CPU-only machine all the same),
#              SHARDTRAIN_TB_ENV (the tensorboard folder, default ${XDG_CACHE_HOME:-$HOME/.cache}/shardtrain/venv-tb1),
#              SHARDTRAIN_NO_INSTALL=1 (use the environment if it is there, install nothing).
#
# What hf installs, and why this set (the smallest that works on a CPU-only machine):
#   * PyTorch: Debian's python3-torch (1.13, CPU only; about 176 MB to download, 0.8 GB installed).
#     PyPI's torch wheel for Linux is built for CUDA: the wheel alone is 539 MB and does not import
#     without its NVIDIA packages (libcufile, cuDNN, cuBLAS, NCCL, ...: 2.8 GB to download with them).
#   * transformers 4.46.3 and its pure-Python/small wheels (tokenizers, safetensors, huggingface-hub,
#     regex, ...: about 20 MB) from PyPI, into a venv that sees the system's packages (torch, numpy).
#     4.46 is the last line that supports torch 1.13 (later ones need torch >= 2).
# What peer installs: torch (>= 2, < 3) and numpy from PyPI into a venv of Debian's python3 that does NOT
# see the system's packages, so the peer can never be Debian's torch 1.13 by accident.
# What tensorboard installs: tensorboard 2.20.0 and its dependencies (protobuf, numpy, grpcio, werkzeug,
# ...: about 30 MB) from PyPI into a venv of Debian's python3 that does not see the system's packages.
# No TensorFlow: tensorboard reads event files through its own stub (tensorboard.compat.tensorflow_stub).
set -euo pipefail
kind="${1:-hf}"
say() { echo "python-env.sh: $*" >&2; }
skip() { say "$*"; exit 77; }
# fresh_venv WHAT [VENV OPTIONS...]: a new, empty venv of Debian's python3 at $env_dir (Debian's
# python3-venv installed first when missing, as root), announced with WHAT; skips (77) when it cannot.
fresh_venv() {
  local what=$1; shift
  /usr/bin/python3 -c "import venv, ensurepip" 2>/dev/null || {
    [ "$(id -u)" -eq 0 ] || skip "needs Debian's python3-venv: sudo apt-get install -y python3-venv"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q python3-venv >/dev/null 2>&1 ||
      skip "could not install python3-venv with apt-get"
  }
  say "creating $env_dir ($what)"
  rm -rf "$env_dir"
  mkdir -p "$(dirname "$env_dir")"
  /usr/bin/python3 -m venv "$@" "$env_dir" || skip "python3 -m venv failed"
}

pip_install() { "$py" -m pip install -q --disable-pip-version-check "$@" >&2; }
# hf's torch is Debian's (see above): its packages installed first where missing, as root.
debian_torch() {
  local debs=() p
  for p in python3-torch python3-venv python3-numpy; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || debs+=("$p")
  done
  if ((${#debs[@]})); then
    [ "$(id -u)" -eq 0 ] || skip "needs the Debian packages ${debs[*]}: sudo apt-get install -y ${debs[*]}"
    say "installing ${debs[*]} (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 install -y -q "${debs[@]}" >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && apt-get -o DPkg::Lock::Timeout=600 install -y -q "${debs[@]}" >/dev/null 2>&1; } ||
      skip "could not install ${debs[*]} with apt-get"
  fi
  /usr/bin/python3 -c "import torch" 2>/dev/null || skip "Debian's python3-torch is installed but does not import"
}

# Each environment: its folder, what it must import (check), how it is made (venv options, install).
venv_options=() before=:
case "$kind" in
  peer)
    env_dir="${SHARDTRAIN_PEER_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/shardtrain/venv-torch2}"
    what="PyTorch 2.x from ${SHARDTRAIN_TORCH_INDEX:-PyPI}; once, several minutes"
    check="import torch, torch.nn.functional as F
assert int(torch.__version__.split('.')[0]) >= 2 and hasattr(F, 'scaled_dot_product_attention')"
    install() {
      local index=()
      [ -n "${SHARDTRAIN_TORCH_INDEX:-}" ] && index=(--index-url "$SHARDTRAIN_TORCH_INDEX")
      pip_install "${index[@]}" "torch>=2,<3" && pip_install numpy
    } ;;
  tensorboard)
    env_dir="${SHARDTRAIN_TB_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/shardtrain/venv-tb1}"
    what="tensorboard 2.20.0 from PyPI; once"
    check="import tensorboard
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
assert tensorboard.__version__ == '2.20.0'"
    install() { pip_install tensorboard==2.20.0; } ;;
  hf)
    env_dir="${SHARDTRAIN_PY_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/shardtrain/venv-hf1}"
    what="transformers from PyPI beside Debian's torch; once"
    check="import torch, transformers, tokenizers, safetensors"
    venv_options=(--system-site-packages) before=debian_torch
    install() { pip_install transformers==4.46.3 "tokenizers>=0.20,<0.21" "safetensors>=0.4.1" "huggingface-hub>=0.23.2,<1.0"; } ;;
  *) say "unknown environment '$kind' (hf, peer or tensorboard)"; exit 2 ;;
esac
py="$env_dir/bin/python"
ready() { [ -x "$py" ] && [ -e "$env_dir/.complete" ] && "$py" -c "$check" 2>/dev/null; }
if ready; then echo "$py"; exit 0; fi
[ "${SHARDTRAIN_NO_INSTALL:-0}" = 1 ] && skip "no $kind environment at $env_dir (SHARDTRAIN_NO_INSTALL=1)"
"$before"
fresh_venv "$what" "${venv_options[@]}"
install || skip "pip could not install the $kind environment's packages (is the index reachable?)"
touch "$env_dir/.complete"
ready || skip "the environment at $env_dir does not pass its check: $check"
echo "$py"
