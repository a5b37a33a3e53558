"""The frame of the tests' module of named functions (tests/scripts/checks.py): JSON readers, a registry of subcommands, and one main that turns the
outcome into an exit status and a one-line message.

A subcommand raises Failed when what it checked does not hold (exit 1) and Unusable when its input
cannot be read (exit 2); argparse exits 2 on unusable arguments.
"""
import argparse
import json
import sys


class Failed(Exception):
    """An expectation that does not hold; the message says what was found and what was expected."""


class Unusable(Exception):
    """Input that cannot be read at all."""


def expect(condition, message):
    """Raises Failed(message) unless condition holds (an assert that `python3 -O` cannot strip)."""
    if not condition:
        raise Failed(message)


def load(path):
    """The JSON document in path; Unusable where it is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Unusable(f"cannot read {path}: {e}")


def load_lines(path):
    """The records of a JSON-lines file (a step log), in order, empty lines left out."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise Unusable(f"cannot read {path}: {e}")


def read_text(path):
    """The text of path; Unusable where it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise Unusable(f"cannot read {path}: {e}")


class Registry:
    """Functions registered as subcommands of one program.

    @registry.command(("path", str), ("rows", str, "+"), ("--world", int)) registers the function
    as the subcommand of its name with underscores as dashes; each argument is (name, type) for a
    positional one, (name, type, nargs) for a list, or (--name, type) for a required option. The
    function's docstring is its help."""

    def __init__(self, prog, description):
        self.prog, self.description, self.commands = prog, description, {}

    def command(self, *arguments):
        def register(f):
            self.commands[f.__name__.replace("_", "-")] = (f, arguments)
            return f
        return register

    def parser(self):
        p = argparse.ArgumentParser(prog=self.prog, description=self.description)
        sub = p.add_subparsers(dest="subcommand", required=True, metavar="NAME")
        for name, (f, arguments) in self.commands.items():
            doc = f.__doc__ or ""
            s = sub.add_parser(name, help=doc.split("\n")[0], description=doc)
            for a in arguments:
                kind = a[1] if len(a) > 1 else str
                if a[0].startswith("--"):
                    s.add_argument(a[0], type=kind, required=True)
                elif len(a) > 2:
                    s.add_argument(a[0], type=kind, nargs=a[2])
                else:
                    s.add_argument(a[0], type=kind)
        return p

    def main(self, argv):
        """Runs the subcommand argv names; returns the exit status (0, 1 failed, 2 unusable)."""
        args = vars(self.parser().parse_args(argv))
        name = args.pop("subcommand")
        try:
            self.commands[name][0](**args)
        except Failed as e:
            print(f"{self.prog} {name}: {e}", file=sys.stderr)
            return 1
        except Unusable as e:
            print(f"{self.prog} {name}: {e}", file=sys.stderr)
            return 2
        except (KeyError, IndexError, TypeError) as e:
            # A report without a field the function reads: the tool wrote something else than expected.
            print(f"{self.prog} {name}: missing or malformed field: {type(e).__name__} {e}", file=sys.stderr)
            return 1
        return 0
