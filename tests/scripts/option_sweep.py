#!/usr/bin/env python3
"""Out-of-range values for every numeric option of every tool (issue 50: "no input crashes a tool").

    option_sweep.py BIN_DIR WORK_DIR [--jobs N] [--only TOOL[:SUBCOMMAND]]...

Every executable in BIN_DIR is a tool; its subcommands are the ones its --help lists. The options
are read from each command's --help (CLI11's listing), so a new option is swept without a change
here: every option of type INT, UINT or FLOAT gets, one run each,

    0, -1, 1e18, 2^63, nan, and a word that is no number

on top of the command's base arguments (BASES below: a run that stops at a missing input right after
the options are checked, or a cheap real run; never training). Each run must end, within 20 s, in
one of two ways:

  * refused: exit 2 with one line on stderr naming the option;
  * accepted: the same ending as the base run alone (its exit status and last line), i.e. the value
    passed the checks and the run went on to stop where the base run stops.

Some values must be refused whatever the option: a word, nan (no option here means "not a
number"), -1 for UINT and 2^63 for INT (they wrap or clamp), and -1 for any option not in
NEGATIVE_OK (a negative count, size, rate or time is never meant). A signal, exit 70 ("internal
error"), a hang or any other ending is a finding. Exits 1 listing the findings, 0 when none.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

MISSING = "/nonexistent-option-sweep"
# Per command (tool, or "tool subcommand"): the other arguments of every run. {work} is the run's
# own empty folder. Each stops at a missing input (MISSING) after the option checks, or is a small
# real run (predict prints a table; collectives times one 8-64 byte broadcast on one rank).
BASES = {
    "ckpt-reshard": [MISSING + "/ckpt", "--out", "{work}/out"],
    "data-prep": ["-o", "{work}/out.h5", MISSING + "/in.jsonl"],
    "ddp-train": ["--data", MISSING + "/data.h5", "--run-dir", "{work}/run"],
    "fsdp-train": ["--data", MISSING + "/data.h5", "--run-dir", "{work}/run"],
    "equiv-check": [MISSING + "/a.jsonl", MISSING + "/b.jsonl"],
    "hang-diagnose": [MISSING + "/run"],
    "kill-resume-proof": ["--bin", MISSING, "--work", "{work}/proof"],
    "run-resilient": ["--max-restarts", "0", "--backoff", "0", "--", "/bin/false", "--run-dir", "{work}/run"],
    "pipeline": ["--input", MISSING + "/docs.jsonl", "--cutoff", "2024-01-01T00:00:00Z", "--name", "sweep", "--local",
                 "--root", "{work}", "--bin", MISSING],
    "pipeline cycles": ["--input", MISSING + "/docs.jsonl", "--snapshots", "2024-01-01T00:00:00Z", "--holdout-s", "10",
                        "--work", "{work}/cycles", "--bin", MISSING],
    "scale-bench collectives": ["--min-bytes", "8", "--max-bytes", "64", "--iterations", "1", "--warmup", "0",
                                "--ops", "broadcast"],
    "scale-bench compare": [MISSING + "/spec.json"],
    "scale-bench fit": ["--collectives", MISSING + "/sweep.json", "-o", "{work}/model.json"],
    "scale-bench predict": ["--example", "seed-lab"],
    "scale-bench plan": ["--params", "1e6", "--ranks", "2", "--memory-per-rank", "8GB", "--model", MISSING + "/m.json"],
    "release-gate eval": ["--data", MISSING + "/data.h5", "--cutoff", "2024-01-01T00:00:00Z", MISSING + "/ckpt"],
    "release-gate baseline": ["--registry", "{work}/registry", "--data", MISSING + "/data.h5", "--cutoff",
                              "2024-01-01T00:00:00Z", "sweep"],
    "release-gate decide": ["--policy", MISSING + "/policy.json", "--registry", "{work}/registry", MISSING + "/ckpt"],
    "release-gate monitor": ["--registry", "{work}/registry", "--policy", MISSING + "/policy.json", "--data",
                             MISSING + "/data.h5"],
}
# Options for which -1 is a meaningful value, with why (none yet: the tools refuse negative numbers
# unless an option is marked with allow_negative(), tool/numbers.hpp).
NEGATIVE_OK = {
}
# Findings known and left to the owners of the code (each entry must still be found, else the sweep
# asks for its removal): (command, option) -> why.
KNOWN = {
}
VALUES = ["0", "-1", "1e18", "9223372036854775808", "nan", "twelve"]
TIMEOUT_S = 20
# An option line of CLI11's --help: "  -o,--output TEXT REQUIRED   Description", "  --zero-stage
# INT:INT in [0 - 3]=3", "  --np INT:POSITIVE=2 ...": the names, then the type (up to two spaces).
OPTION_LINE = re.compile(r"^\s{2}(-[^\s]+)(?: ((?:[^ ]| (?! ))+))?(?:\s{2,}.*)?$")


def run(argv, cwd, timeout=TIMEOUT_S):
    """(status, stdout, stderr): status is the exit code, -N for signal N, 'timeout' for a hang."""
    try:
        p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", "", (e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr) or ""


def commands(bin_dir, only):
    """[(name, argv prefix, help text)] of every tool and subcommand."""
    out = []
    for tool in sorted(os.listdir(bin_dir)):
        path = os.path.join(bin_dir, tool)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        status, help_text, err = run([path, "--help"], cwd=bin_dir)
        if status != 0:
            raise SystemExit(f"option_sweep: {tool} --help exited {status}: {err.strip()}")
        out.append((tool, [path], help_text))
        if "Subcommands:" in help_text:
            for line in help_text.split("Subcommands:", 1)[1].splitlines()[1:]:
                if not line.strip():
                    break
                m = re.match(r"^  ([a-z][a-z0-9-]*)\b", line)
                if m:
                    status, sub_help, err = run([path, m.group(1), "--help"], cwd=bin_dir)
                    if status != 0:
                        raise SystemExit(f"option_sweep: {tool} {m.group(1)} --help exited {status}: {err.strip()}")
                    out.append((f"{tool} {m.group(1)}", [path, m.group(1)], sub_help))
    if only:
        out = [c for c in out if c[0] in only or c[0].split(" ")[0] in only]
    return out


def numeric_options(help_text):
    """[(long name, type)] of the INT, UINT and FLOAT options of one --help text (its own section)."""
    section = help_text.split("Subcommands:", 1)[0]
    found = []
    for line in section.splitlines():
        m = OPTION_LINE.match(line)
        if not m or not m.group(2):
            continue
        names = [n for n in m.group(1).split(",") if n.startswith("--")]
        kind = re.match(r"[A-Z]+", m.group(2))
        if names and kind and kind.group(0) in ("INT", "UINT", "FLOAT"):
            found.append((names[0], kind.group(0)))
    return found


def without(base, option):
    """The base arguments without `option` and its value (the swept one replaces it)."""
    out, skip = [], False
    for i, arg in enumerate(base):
        if skip:
            skip = False
            continue
        if arg == option:
            skip = True
            continue
        out.append(arg)
    return out


def first_line(text):
    return next((line for line in text.splitlines() if line.strip()), "")


def last_line(text):
    return next((line for line in reversed(text.splitlines()) if line.strip()), "")


def ending(status, stderr, work):
    """What a run's ending is compared by: its status and its last stderr line (where it stopped;
    progress lines before it may repeat the value), the run's folder masked."""
    return status, last_line(stderr).replace(work, "{work}")


def sweep_one(job):
    name, prefix, base, option, kind, value, root = job
    work = tempfile.mkdtemp(dir=root)
    try:
        argv = prefix + [f"{option}={value}"] + [a.replace("{work}", work) for a in without(base, option)]
        status, out, err = run(argv, cwd=work)
        return job, status, err, ending(status, err, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def must_refuse(option, kind, value):
    if value in ("nan", "twelve"):
        return "not a number"
    if value == "-1" and kind == "UINT":
        return "a negative value for an unsigned option"
    if value == "-1" and option not in NEGATIVE_OK:
        return "a negative value (not in NEGATIVE_OK)"
    if value == "9223372036854775808" and kind == "INT":
        return "2^63 does not fit a signed 64-bit integer"
    return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bin_dir")
    parser.add_argument("work_dir")
    parser.add_argument("--jobs", type=int, default=8, help="runs at once (most of a run is waiting; default 8)")
    parser.add_argument("--only", action="append", default=[], help="a tool or 'tool subcommand' (repeatable)")
    args = parser.parse_args()
    bin_dir = os.path.abspath(args.bin_dir)
    os.makedirs(args.work_dir, exist_ok=True)
    root = tempfile.mkdtemp(prefix="sweep-", dir=os.path.abspath(args.work_dir))
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

    findings, jobs, baselines, swept, prefixes = [], [], {}, [], {}
    for name, prefix, help_text in commands(bin_dir, set(args.only)):
        prefixes[name] = prefix
        options = numeric_options(help_text)
        if not options:
            continue
        if name not in BASES:
            findings.append(f"{name}: {len(options)} numeric options but no base command line: add one to BASES "
                            f"in {os.path.basename(__file__)}")
            continue
        swept.append((name, len(options)))
        for option, kind in options:
            for value in VALUES:
                jobs.append((name, prefix, BASES[name], option, kind, value, root))
    # The base runs first: what "accepted" ends like.
    for name, _ in swept:
        work = tempfile.mkdtemp(dir=root)
        status, _, err = run(prefixes[name] + [a.replace("{work}", work) for a in BASES[name]], cwd=work)
        baselines[name] = ending(status, err, work)
        if status == "timeout" or (isinstance(status, int) and (status < 0 or status == 70)):
            findings.append(f"{name}: the base run itself ended {status}: {first_line(err)}")

    counts = {"refused": 0, "accepted": 0}
    known_seen, known = set(), []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for job, status, err, end in pool.map(sweep_one, jobs):
            name, _, _, option, kind, value, _ = job
            where = f"{name} {option}={value}"
            before = len(findings)
            lines = [line for line in err.splitlines() if line.strip()]
            if status == "timeout":
                findings.append(f"{where}: no end within {TIMEOUT_S} s (a hang)")
            elif isinstance(status, int) and status < 0:
                findings.append(f"{where}: killed by signal {-status}: {first_line(err)}")
            elif status == 70:
                findings.append(f"{where}: internal error (exit 70): {first_line(err)}")
            elif status == 2 and lines and option in lines[0] and end != baselines[name]:
                if len(lines) != 1:
                    findings.append(f"{where}: refused in {len(lines)} lines, not one: {' | '.join(lines[:3])}")
                else:
                    counts["refused"] += 1
            elif end == baselines[name]:
                why = must_refuse(option, kind, value)
                if why:
                    findings.append(f"{where}: accepted, but {why} must be refused naming the option")
                else:
                    counts["accepted"] += 1
            else:
                findings.append(f"{where}: exit {status}, neither a refusal naming the option nor the base run's "
                                f"ending ({baselines[name][0]}: {baselines[name][1]}): {first_line(err)}")
            if len(findings) > before and (name, option) in KNOWN:
                known_seen.add((name, option))
                known.append(findings.pop())
    for name, option in KNOWN:
        if (name, option) not in known_seen and any(n == name for n, _ in swept):
            findings.append(f"{name} {option}: listed in KNOWN but no longer found: remove it from KNOWN")
    shutil.rmtree(root, ignore_errors=True)
    total = sum(n for _, n in swept)
    print(f"option_sweep: {len(swept)} commands, {total} numeric options, {len(jobs)} runs: "
          f"{counts['refused']} refused naming the option, {counts['accepted']} accepted, {len(known)} known, "
          f"{len(findings)} findings")
    for name, n in swept:
        print(f"  {name}: {n} options")
    for f in known:
        print("KNOWN " + f + " -- " + KNOWN[tuple(f.split("=", 1)[0].rsplit(" ", 1))])
    for f in findings:
        print("FINDING " + f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
