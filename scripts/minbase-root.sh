#!/usr/bin/env bash
# minbase-root.sh: a minimal Debian bookworm root (debootstrap --variant=minbase), kept as a tarball
# in a cache outside the clone, for rehearsing the device bundle where none of the project's
# dependencies is installed (tests/scripts/bundle_rehearsal.sh).
#
# Usage: scripts/minbase-root.sh [--print]
#   Makes the cache tarball when it is missing (debootstrap downloads the packages from Debian's
#   registry, the mirror apt already uses) and prints its path. --print: only print the path.
# Environment: SHARDTRAIN_ROOT_CACHE (default /var/cache/shardtrain), DEBIAN_MIRROR (default: the
#   first Debian archive URI of /etc/apt/sources.list*, else http://deb.debian.org/debian).
# Needs root (debootstrap) and the debootstrap package (scripts/setup.sh installs it).
# Exit status: 0 with the tarball's path on stdout; 1 when debootstrap fails; 2 for usage errors.
set -euo pipefail

cache="${SHARDTRAIN_ROOT_CACHE:-/var/cache/shardtrain}"
tarball="$cache/minbase-bookworm.tar"
say() { echo "minbase-root.sh: $*" >&2; }
case "${1:-}" in
  "") ;;
  --print) echo "$tarball"; exit 0 ;;
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) say "unknown argument '$1' (see --help)"; exit 2 ;;
esac
if [ -s "$tarball" ]; then echo "$tarball"; exit 0; fi

[ "$(id -u)" -eq 0 ] || { say "debootstrap needs root: run as root, or make $tarball elsewhere"; exit 2; }
command -v debootstrap >/dev/null || { say "debootstrap is missing: apt-get install -y debootstrap (scripts/setup.sh does)"; exit 2; }
mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  # deb822 "URIs:" lines and one-line "deb URI suite" entries; the security archive is not a mirror.
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
           grep -oE '(^URIs:[[:space:]]*|^deb[[:space:]]+)[a-z]+://[^[:space:]]+/debian/?([[:space:]]|$)' |
           grep -oE '[a-z]+://[^[:space:]]+' | head -1 || true)
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

mkdir -p "$cache"
work=$(mktemp -d "$cache/minbase.XXXXXX")
trap 'rm -rf "$work"' EXIT
say "debootstrap --variant=minbase bookworm from $mirror (a few minutes on a fresh machine)"
t0=$SECONDS
if ! debootstrap --variant=minbase bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -20 "$work/debootstrap.log" >&2
  say "debootstrap failed (log above); is $mirror reachable?"
  exit 1
fi
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"* 2>/dev/null || true
tar -C "$work/root" -cf "$work/root.tar" .
mv "$work/root.tar" "$tarball"  # atomic: a cache file is whole or absent
say "made $tarball ($(du -h "$tarball" | cut -f1)) in $((SECONDS - t0)) s"
echo "$tarball"
