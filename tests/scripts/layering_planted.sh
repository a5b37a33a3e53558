#!/usr/bin/env bash
# The layering check must fail, naming file and line, on an upward include and on a public header
# that includes a private one; and pass on the untouched copy. Usage: layering_planted.sh SRC WORK
set -euo pipefail
src=$1 work=$2
rm -rf "$work"; mkdir -p "$work"
cp -r "$src/libcore" "$src/scripts" "$work/"
mkdir -p "$work/tools" "$work/tests"
check() { python3 "$work/scripts/check-layers.py" "$work"; }

check >/dev/null || { echo "FAIL: the unmodified copy does not pass"; check; exit 1; }

# plant FILE INCLUDE_LINE EXPECTED: appends the include to FILE (relative to the copy), expects the
# checker to fail with a line "FILE:LINE: EXPECTED...", then removes the include again.
plant() {
  local file=$1 include=$2 expected=$3
  local line=$(($(wc -l <"$work/$file") + 1)) out
  echo "$include" >>"$work/$file"
  out=$(check) && { echo "FAIL: $file with $include passed the check"; exit 1; }
  echo "$out"
  grep -qF "$file:$line: $expected" <<<"$out" || { echo "FAIL: the message does not name $file:$line"; exit 1; }
  sed -i '$d' "$work/$file"
}
# 1. base (the lowest layer) includes a train header.
plant libcore/src/base/log.cpp '#include "shardtrain/train/trainer.hpp"' \
  'layer base includes "shardtrain/train/trainer.hpp" of layer train, above it'
# 2. a public header includes a private one.
plant libcore/include/shardtrain/ckpt/read.hpp '#include "ckpt/internal.hpp"' \
  'public header includes the private header "libcore/src/ckpt/internal.hpp"'
check >/dev/null || { echo "FAIL: the copy does not pass again after the plants were removed"; exit 1; }
echo "PASS: both planted includes were named, the clean tree passes"
