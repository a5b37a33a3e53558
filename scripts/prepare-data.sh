#!/usr/bin/env bash
# Builds the bundled corpora under data/ (git-ignored) with the data-prep tool of a build folder:
#
#   data/fortunes.jsonl, data/fortunes.h5   real English text: the Debian `fortunes` package
#   data/markov.h5                          synthetic Markov corpus with a known entropy rate
#
# Usage: scripts/prepare-data.sh [BUILD_DIR]        (default: build; needs BUILD_DIR/bin/data-prep)
# Environment: FORTUNES_DIR (default /usr/share/games/fortunes), DATA_DIR (default <repo>/data).
# Installs nothing: the set-up script installs the `fortunes` package (apt-get install fortunes).
#
# Fortunes rule (documented in docs/FORMATS.md, "Bundled corpora"):
#  * Input: every plain file directly in FORTUNES_DIR, sorted by name; *.dat and *.u8 (strfile
#    indexes and links) and sub-folders (off/) are skipped. Fortunes are separated by lines holding
#    only "%"; empty fortunes are dropped; the text keeps its lines joined by "\n" (no final "\n").
#  * One document per fortune: id "<file>/<j>" (j = 0-based index of the fortune in its file),
#    version 1, owner = the file name.
#  * event_time: every file's fortunes are spread evenly over 2001-01-01T00:00:00Z .. 2021-01-01
#    (20 years, S = 631152000 s): event = 978307200 + floor(j * S / n) + 60 * i, with n the file's
#    fortune count and i the file's 0-based position in name order (so no two files tie).
#    A cutoff therefore holds out the latest part of EVERY owner, which gives per-owner slices.
#  * available_time = event_time + 86400 (a fixed one-day publication delay).
# The rule uses only file contents and names, so the corpus and its snapshot id are reproducible.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
case "$build" in /*) ;; *) build="$here/$build" ;; esac
data_prep="$build/bin/data-prep"
fortunes_dir="${FORTUNES_DIR:-/usr/share/games/fortunes}"
data_dir="${DATA_DIR:-$here/data}"

die() { echo "prepare-data.sh: error: $*" >&2; exit 2; }
[ -x "$data_prep" ] || die "$data_prep not found: build first (cmake --build $build)"
[ -d "$fortunes_dir" ] || die "$fortunes_dir not found: install the fortunes package (apt-get install -y fortunes)"
command -v python3 >/dev/null || die "python3 is needed to convert the fortunes to JSONL (scripts/lib/fortunes_to_jsonl.py)"
command -v jq >/dev/null || die "jq is needed to read the summary (apt-get install -y jq)"
mkdir -p "$data_dir"

echo "prepare-data.sh: fortunes from $fortunes_dir -> $data_dir/fortunes.jsonl" >&2
python3 "$here/scripts/lib/fortunes_to_jsonl.py" "$fortunes_dir" "$data_dir/fortunes.jsonl.tmp"
mv "$data_dir/fortunes.jsonl.tmp" "$data_dir/fortunes.jsonl"

"$data_prep" "$data_dir/fortunes.jsonl" -o "$data_dir/fortunes.h5" > "$data_dir/fortunes.summary.json"
echo "prepare-data.sh: $data_dir/fortunes.h5 (summary: $data_dir/fortunes.summary.json)" >&2

# Synthetic corpus: 16-state Markov chain, 20 documents x 10000 tokens (seed 1): see data-prep(1).
"$data_prep" --synthetic markov --symbols 16 --successors 3 --seed 1 --documents 20 --doc-tokens 10000 \
  -o "$data_dir/markov.h5" > "$data_dir/markov.summary.json"
printf 'prepare-data.sh: %s (entropy %.6f nats/token)\n' "$data_dir/markov.h5" \
  "$(jq -er .entropy_nats_per_token "$data_dir/markov.summary.json")" >&2
