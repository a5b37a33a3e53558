#!/usr/bin/env python3
"""The main of the end-to-end tests' checks and fixtures (tests/scripts/*.sh): runs one by its name.

Usage: python3 checks.py NAME ARGS...        (python3 checks.py --help lists the names;
                                              python3 checks.py NAME --help its arguments)

The functions are in checkslib/, one module per theme; checkslib/__init__.py says what a check
prints, how it fails and its exit codes.
"""
import sys

from checkslib import checks

if __name__ == "__main__":
    sys.exit(checks.main(sys.argv[1:]))
