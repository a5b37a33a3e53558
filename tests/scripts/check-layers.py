#!/usr/bin/env python3
"""The layering rules the build cannot check (ctest "layering").

The build itself enforces the layer order of libcore/LAYERS: each layer is a CMake target that sees
only its own headers and those of the layers it links, all below it (libcore/CMakeLists.txt), so an
upward include fails to compile. What include roots cannot see is checked here, in libcore's files:
  * a public header (libcore/include/shardtrain/...) that includes a private one (libcore/src/...):
    it compiles inside libcore, where the private folder is on the include path, and breaks only
    for the tool or test that includes the public header;
  * a quoted include with '..' in its path: resolved from the including file's folder, it reaches
    any header of any layer past the include roots;
  * a call of an MPI function (MPI_Xxx( ...) in libcore or tools/ outside the comm layer
    (libcore/src/comm, libcore/include/shardtrain/comm): every collective of a job goes through a
    Communicator, with a sequence number, a timeout and a flight record (contract 6), and MPI's
    start and end, a benchmark's bare yardstick and the world's size are comm's functions too
    (comm/mpi.hpp, comm/bare_mpi.hpp). MPI's types and constants (MPI_Comm, MPI_COMM_WORLD) may
    still be named where a communicator is made; comments are not read. The tests and the
    micro-benchmarks in bench/ (their own MPI set-up) are not checked.
System includes (<...>) are not checked. Fails naming FILE:LINE.

Usage: tests/scripts/check-layers.py [REPO_ROOT]   (default: the repository holding this script)
Exit status: 0 clean, 1 violations found (one line each), 2 the tree cannot be read.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
MPI_CALL = re.compile(r'\b(MPI_[A-Z][a-z0-9_]*)\s*\(')
COMM_LAYER = (os.path.join("libcore", "src", "comm") + os.sep, os.path.join("libcore", "include", "shardtrain", "comm") + os.sep)
SOURCE_EXT = (".hpp", ".cpp", ".h", ".cu", ".cuh")


def files_under(root, *parts):
    top = os.path.join(root, *parts)
    for dirpath, _, names in os.walk(top):
        for n in sorted(names):
            if n.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, n), root)


def resolve_private(root, including_file, inc):
    """Path (relative to root) of a private libcore header a quoted include names, or None."""
    for base in (os.path.dirname(including_file), os.path.join("libcore", "src")):
        candidate = os.path.normpath(os.path.join(base, inc))
        if candidate.startswith(os.path.join("libcore", "src") + os.sep) and os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def code_of(line):
    """The line without its // comment and its string literals (a message may quote an MPI call)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


def raw_mpi_calls(rel, lines):
    """One problem per MPI call in a file outside the comm layer."""
    if rel.startswith(COMM_LAYER):
        return []
    problems = []
    for number, line in enumerate(lines, 1):
        for m in MPI_CALL.finditer(code_of(line)):
            problems.append("%s:%d: calls %s outside the comm layer: go through a Communicator, comm/mpi.hpp "
                            "or (a benchmark's yardstick) comm/bare_mpi.hpp" % (rel, number, m.group(1)))
    return problems


def check(root):
    if not os.path.isfile(os.path.join(root, "libcore", "LAYERS")):
        print("check-layers: %s has no libcore/LAYERS" % root, file=sys.stderr)
        sys.exit(2)
    public_root = os.path.join("libcore", "include") + os.sep
    problems = []
    files = list(files_under(root, "libcore", "include")) + list(files_under(root, "libcore", "src"))
    for rel in list(files_under(root, "tools")):
        with open(os.path.join(root, rel), errors="replace") as f:
            problems += raw_mpi_calls(rel, f.readlines())
    for rel in files:
        with open(os.path.join(root, rel), errors="replace") as f:
            lines = f.readlines()
        problems += raw_mpi_calls(rel, lines)
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc, where = m.group(1), "%s:%d" % (rel, number)
            if ".." in inc.split("/"):
                problems.append('%s: includes "%s": a ".." path bypasses the layers\' include roots; include '
                                '"shardtrain/<layer>/<name>.hpp" (or "<layer>/<name>.hpp" within the layer)' % (where, inc))
                continue
            if rel.startswith(public_root) and not inc.startswith("shardtrain/"):
                target = resolve_private(root, rel, inc)
                if target:
                    problems.append('%s: public header includes the private header "%s"' % (where, target))
    return problems, len(files)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    problems, count = check(root)
    for p in problems:
        print(p)
    if problems:
        print("check-layers: %d violation(s) in %d files" % (len(problems), count))
        return 1
    print("check-layers: %d files, no public header includes a private one, no '..' include, no MPI call "
          "outside the comm layer (the layer order itself is the build's: libcore/CMakeLists.txt)" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
