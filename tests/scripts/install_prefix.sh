#!/usr/bin/env bash
# `cmake --install BUILD --prefix PREFIX` into an empty folder, then the installed tools as a cluster
# admin's module would use them: every tool in PREFIX/bin runs --help with an empty environment
# (env -i: no PATH, no LD_LIBRARY_PATH), finds its libraries through $ORIGIN-relative run paths
# (readelf shows them; ldd finds every library), and `man -M PREFIX/share/man` shows each man page
# of man/man1 and man/man5.
#
# Usage: install_prefix.sh BIN_DIR WORK_DIR      (the build folder is BIN_DIR/..)
set -euo pipefail
export MANPAGER=cat  # and -P cat below: no pager waits for a terminal
BIN_DIR=$1 WORK=$2
BUILD=$(cd "$BIN_DIR/.." && pwd)
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
command -v man >/dev/null || fail "man is missing: apt-get install -y man-db (scripts/setup.sh installs it)"

rm -rf "$WORK" && mkdir -p "$WORK"
PREFIX="$WORK/prefix"
mkdir "$PREFIX"
[ -z "$(ls -A "$PREFIX")" ] || fail "$PREFIX is not empty"
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; fail "cmake --install"; }
pass "cmake --install $BUILD --prefix $PREFIX ($(grep -c Installing "$WORK/install.log") files)"

# Every tool of tools/*.cpp, and nothing else, in PREFIX/bin.
expected=$(cd "$SRC/tools" && ls ./*.cpp | sed 's|^\./||; s|\.cpp$||' | sort)
installed=$(ls "$PREFIX/bin" | sort)
[ "$expected" = "$installed" ] || fail "PREFIX/bin holds [$installed], expected the tools [$expected]"
pass "PREFIX/bin holds the $(echo "$expected" | wc -l) tools"

for tool in $expected; do
  exe="$PREFIX/bin/$tool"
  runpath=$(readelf -d "$exe" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  case ":$runpath:" in *':$ORIGIN/../lib:'*) ;; *) fail "$tool: RUNPATH '$runpath' lacks \$ORIGIN/../lib" ;; esac
  # No path into the build or source tree may remain: the install must outlive both.
  case "$runpath" in *"$BUILD"*|*"$SRC"*) fail "$tool: RUNPATH '$runpath' points into the build or source tree" ;; esac
  if env -i "$(command -v ldd)" "$exe" | grep -q "not found"; then
    env -i "$(command -v ldd)" "$exe" | grep "not found"; fail "$tool: a library is not found with an empty environment"
  fi
  out=$(env -i "$exe" --help 2>&1) || fail "$tool --help exited non-zero with an empty environment: $out"
  grep -qi "usage" <<<"$out" || fail "$tool --help printed no usage: $out"
done
pass "every installed tool runs --help with env -i; RUNPATH \$ORIGIN/../lib, no build-tree path"
readelf -d "$PREFIX/bin/ddp-train" | grep -E "RUNPATH|RPATH"

out=$(env -i "$PREFIX/bin/ddp-train" --help)
sed -n 2p <<<"$out"  # whole, then cut: head on the pipe would stop the tool with SIGPIPE (pipefail)

# Man pages: every page of man/man1 and man/man5, installed and readable through man -M.
for page in "$SRC"/man/man1/*.1 "$SRC"/man/man5/*.5; do
  sec=${page##*.} name=$(basename "$page" ".$sec")
  [ -f "$PREFIX/share/man/man$sec/$name.$sec" ] || fail "PREFIX/share/man/man$sec/$name.$sec not installed"
  text=$(man -P cat -M "$PREFIX/share/man" "$sec" "$name" 2>&1) || fail "man -M $PREFIX/share/man $sec $name: $text"
  grep -q "NAME" <<<"$text" || fail "man $sec $name shows no NAME section"
done
pass "man -M PREFIX/share/man shows every man1 and man5 page"
text=$(man -P cat -M "$PREFIX/share/man" ddp-train)
sed -n 1,4p <<<"$text"
echo "install_prefix: all checks passed"
