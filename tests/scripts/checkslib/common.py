"""What every theme's module shares: the subcommand registry and the readers of what the tools wrote."""
import json

from .subcommands import Registry, Unusable, expect, load, load_lines, read_text

from . import __doc__ as package_doc

# The frame's names the themes use, passed on from here (subcommands.py).
__all__ = ["checks", "command", "Unusable", "expect", "load", "load_lines", "read_text", "save", "group_of",
           "flight_records"]

checks = Registry("checks.py", package_doc.split("\n")[0])
command = checks.command


def save(obj, path):
    """Writes obj to path as JSON."""
    with open(path, "w") as f:
        json.dump(obj, f)


def group_of(dump, name):
    """The flight record's group called name (Failed when the dump has none)."""
    found = [g for g in dump["groups"] if g["name"] == name]
    expect(found, f"rank {dump.get('rank')}'s flight record has no group {name}")
    return found[0]


def flight_records(run, ranks):
    """The flight records flight.rank<R>.json of run, one per rank in ranks."""
    return [load(f"{run}/flight.rank{r}.json") for r in ranks]
