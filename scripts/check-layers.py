#!/usr/bin/env python3
"""Layering check for libcore (ctest "layering").

Reads the layer order from libcore/LAYERS (lowest first) and every #include "..." in libcore,
tools/ and tests/. Fails, naming FILE:LINE, where
  * a file of one layer includes a header of a layer above it;
  * a public header (libcore/include/shardtrain/...) includes a private one (libcore/src/...);
  * a tool or test includes a private header of libcore;
  * a libcore file sits outside every layer folder.
System includes (<...> of anything but shardtrain/) are not checked.

Usage: check-layers.py [REPO_ROOT]   (default: the repository holding this script)
Exit status: 0 clean, 1 violations found (one line each), 2 the tree cannot be read.
"""
import os
import re
import sys

# Quoted includes, and angle-bracket ones of shardtrain's own headers; other <...> are system headers.
INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<(shardtrain/[^>]+)>)')
SOURCE_EXT = (".hpp", ".cpp", ".h", ".cu", ".cuh")


def read_layers(root):
    path = os.path.join(root, "libcore", "LAYERS")
    try:
        with open(path) as f:
            names = [line.split("#", 1)[0].strip() for line in f]
    except OSError as e:
        print("check-layers: cannot read %s: %s" % (path, e.strerror), file=sys.stderr)
        sys.exit(2)
    names = [n for n in names if n]
    return {name: i for i, name in enumerate(names)}, names


def files_under(root, *parts):
    top = os.path.join(root, *parts)
    for dirpath, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, n), root)


def layer_of(rel):
    """(layer, public?) of a libcore path, or (None, None) outside libcore's layer folders."""
    parts = rel.split(os.sep)
    if parts[:3] == ["libcore", "include", "shardtrain"] and len(parts) >= 5:
        return parts[3], True
    if parts[:2] == ["libcore", "src"] and len(parts) >= 4:
        return parts[2], False
    return None, None


def resolve_private(root, including_file, inc):
    """Path (relative to root) of a quoted non-shardtrain include, or None when not a libcore file."""
    for base in (os.path.dirname(including_file), os.path.join("libcore", "src")):
        candidate = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def check(root):
    rank, order = read_layers(root)
    chain = " < ".join(order)
    problems = []
    libcore_files = list(files_under(root, "libcore", "include")) + list(files_under(root, "libcore", "src"))
    other_files = list(files_under(root, "tools")) + list(files_under(root, "tests"))
    for rel in libcore_files + other_files:
        own, public = layer_of(rel)
        in_libcore = rel.startswith("libcore" + os.sep)
        if in_libcore and own not in rank:
            problems.append("%s: not inside a layer folder (layers: %s)" % (rel, chain))
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1) or m.group(2)
            where = "%s:%d" % (rel, number)
            if inc.startswith("shardtrain/"):
                target = inc.split("/")[1] if inc.count("/") >= 2 else None
                if target not in rank:
                    problems.append('%s: includes "%s", which is in no layer folder' % (where, inc))
                elif in_libcore and rank[target] > rank[own]:
                    problems.append('%s: layer %s includes "%s" of layer %s, above it (%s)'
                                    % (where, own, inc, target, chain))
                continue
            target_path = resolve_private(root, rel, inc)
            if target_path is None:
                continue  # a test's or tool's own header, or a generated one
            target, target_public = layer_of(target_path)
            if target is None:
                continue
            if not target_public and not in_libcore:
                problems.append('%s: includes libcore\'s private header "%s"; use a public header under '
                                'shardtrain/' % (where, target_path))
            elif public and not target_public:
                problems.append('%s: public header includes the private header "%s"' % (where, target_path))
            elif in_libcore and target in rank and rank[target] > rank[own]:
                problems.append('%s: layer %s includes "%s" of layer %s, above it (%s)'
                                % (where, own, target_path, target, chain))
    return problems, len(libcore_files) + len(other_files)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    problems, count = check(root)
    for p in problems:
        print(p)
    if problems:
        print("check-layers: %d violation(s) in %d files" % (len(problems), count))
        return 1
    print("check-layers: %d files, every include goes down the layers" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
