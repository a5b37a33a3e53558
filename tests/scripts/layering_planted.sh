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

# 1. base (the lowest layer) includes a train header.
victim=$work/libcore/src/base/log.cpp
line=$(($(wc -l <"$victim") + 1))
echo '#include "shardtrain/train/trainer.hpp"' >>"$victim"
out=$(check) && { echo "FAIL: the planted upward include passed"; exit 1; }
echo "$out"
grep -q "^libcore/src/base/log.cpp:$line: layer base includes \"shardtrain/train/trainer.hpp\" of layer train, above it" <<<"$out" ||
  { echo "FAIL: the message does not name libcore/src/base/log.cpp:$line"; exit 1; }
sed -i '$d' "$victim"

# 2. a public header includes a private one.
victim=$work/libcore/include/shardtrain/ckpt/read.hpp
line=$(($(wc -l <"$victim") + 1))
echo '#include "ckpt/internal.hpp"' >>"$victim"
out=$(check) && { echo "FAIL: the public-to-private include passed"; exit 1; }
echo "$out"
grep -q "^libcore/include/shardtrain/ckpt/read.hpp:$line: public header includes the private header" <<<"$out" ||
  { echo "FAIL: the message does not name libcore/include/shardtrain/ckpt/read.hpp:$line"; exit 1; }
echo "PASS: both planted includes were named, the clean tree passes"
