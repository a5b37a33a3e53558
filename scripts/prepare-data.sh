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
# The fortunes become one document per fortune by `data-prep --fortunes` (the rule: docs/FORMATS.md,
# "Bundled corpora", and libcore/include/shardtrain/data/fortunes.hpp), which also writes them as
# data/fortunes.jsonl (the release chain's example input).
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
command -v jq >/dev/null || die "jq is needed to read the summary (apt-get install -y jq)"
mkdir -p "$data_dir"

"$data_prep" --fortunes "$fortunes_dir" --fortunes-jsonl "$data_dir/fortunes.jsonl" -o "$data_dir/fortunes.h5" \
  > "$data_dir/fortunes.summary.json"
echo "prepare-data.sh: $data_dir/fortunes.h5 (summary: $data_dir/fortunes.summary.json)" >&2

# Synthetic corpus: 16-state Markov chain, 20 documents x 10000 tokens (seed 1): see data-prep(1).
"$data_prep" --synthetic markov --symbols 16 --successors 3 --seed 1 --documents 20 --doc-tokens 10000 \
  -o "$data_dir/markov.h5" > "$data_dir/markov.summary.json"
printf 'prepare-data.sh: %s (entropy %.6f nats/token)\n' "$data_dir/markov.h5" \
  "$(jq -er .entropy_nats_per_token "$data_dir/markov.summary.json")" >&2
