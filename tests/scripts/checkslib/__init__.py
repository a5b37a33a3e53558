"""What the end-to-end tests (tests/scripts/*.sh) compute: one named function per check or fixture.

Usage: python3 checks.py NAME ARGS...        (python3 checks.py --help lists the names;
                                              python3 checks.py NAME --help its arguments)

A check reads what the tools wrote (summaries, step logs, flight records, reports), prints what
it compared on lines starting with two spaces, and exits 0. A failed expectation prints one line,
"checks.py NAME: what was found, what was expected", on stderr and exits 1; input that cannot be
read (a missing file, a file that is no JSON) exits 2 the same way. A fixture writer (make-*) writes
a test's input files; a reader prints one value for the shell.

The checks use only the standard library: the tests run them under Debian's python3 as it is.

This package holds them by theme, one module each; common.py has the registry (`checks`, whose
`command` decorator makes a function a subcommand) and the helpers they share. Importing the
package registers every subcommand, in the order of the imports below (the order --help lists).
"""
# The frame (readers, Failed, the subcommand registry) is subcommands.py beside this file.
from . import (checkpoints, telemetry, flight, faults, datasets, release, kill_resume,
               scale, gpu_check, slurm, metrics)
from .common import checks

__all__ = ["checks", "checkpoints", "telemetry", "flight", "faults", "datasets", "release", "kill_resume",
           "scale", "gpu_check", "slurm", "metrics"]
