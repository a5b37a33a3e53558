#!/usr/bin/env python3
"""The fortunes rule of scripts/prepare-data.sh (docs/FORMATS.md, "Bundled corpora"): the plain
files of a fortunes folder as data-prep JSONL, one document per fortune.

Usage: python3 scripts/lib/fortunes_to_jsonl.py FORTUNES_DIR OUT.jsonl

Every plain file directly in FORTUNES_DIR, sorted by name (*.dat and *.u8, the strfile indexes and
links, and sub-folders skipped); fortunes are separated by lines holding only "%", empty ones
dropped, the text's lines joined by "\\n". Document j of file i (0-based, name order) of n: id
"<file>/<j>", version 1, owner the file name, event_time 2001-01-01 + floor(j x 20 years / n)
+ 60 i seconds (every owner's fortunes spread over the 20 years, no two files tied, so a cutoff
holds out the latest part of every owner), available_time one day later. Only file contents and
names go in, so the corpus and its snapshot id are reproducible.
"""
import datetime
import json
import os
import sys

BASE, SPAN, DELAY = 978307200, 631152000, 86400   # 2001-01-01T00:00:00Z, 20 years, one day (seconds)


def iso(t):
    """Epoch seconds as an ISO-8601 UTC time of whole seconds."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fortunes_of(text):
    """The non-empty fortunes of a fortunes file's text, each without leading or trailing newlines."""
    fortunes, cur = [], []
    for line in text.split("\n"):
        if line == "%":
            fortunes.append("\n".join(cur))
            cur = []
        else:
            cur.append(line)
    fortunes.append("\n".join(cur))
    return [f for f in (f.strip("\n") for f in fortunes) if f.strip()]


def convert(src, out_path):
    """Writes the JSONL of folder src to out_path; returns (documents, files)."""
    names = sorted(n for n in os.listdir(src)
                   if os.path.isfile(os.path.join(src, n)) and not n.endswith((".dat", ".u8")))
    docs = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for i, name in enumerate(names):
            with open(os.path.join(src, name), "rb") as f:
                fortunes = fortunes_of(f.read().decode("utf-8", errors="replace"))
            n = len(fortunes)
            for j, body in enumerate(fortunes):
                event = BASE + (j * SPAN) // n + 60 * i
                out.write(json.dumps({"id": f"{name}/{j}", "version": 1, "owner": name,
                                      "event_time": iso(event), "available_time": iso(event + DELAY),
                                      "text": body.replace("\0", "")}, ensure_ascii=False) + "\n")
                docs += 1
    return docs, len(names)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: fortunes_to_jsonl.py FORTUNES_DIR OUT.jsonl")
    try:
        docs, files = convert(sys.argv[1], sys.argv[2])
    except OSError as e:
        print(f"fortunes_to_jsonl.py: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"prepare-data.sh: {docs} fortunes from {files} files", file=sys.stderr)
