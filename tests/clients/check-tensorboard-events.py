#!/usr/bin/env python3
"""Read a training run's TensorBoard event files with the tensorboard package's own reader and
compare every scalar with the run's step logs.

    PYTHON tests/clients/check-tensorboard-events.py RUN_DIR WORLD STEPS [--stopped-early]

PYTHON: the environment of `scripts/python-env.sh tensorboard` (tensorboard 2.20.0 from PyPI).

For each rank R < WORLD, the files RUN_DIR/tensorboard/rank_R/*tfevents* are read in name order (the
order TensorBoard's directory loader reads a run's files in) by
tensorboard.backend.event_processing.event_file_loader.EventFileLoader, which checks both CRCs of
every record and turns each simple_value into a scalar tensor of the "scalars" plugin, as
TensorBoard shows it. The step log RUN_DIR/steps.rankR.jsonl is read as its reader does (a step
logged twice, by a killed attempt and by the resumed one: the last line wins; a torn line is
skipped).

Checks (exit 0 when all pass, 1 otherwise, each printed):
  1. Every file starts with the file-version record "brain.Event:2"; every value is a float32 scalar
     of the "scalars" plugin.
  2. Per tag, the steps in read order are strictly increasing (nothing duplicated or reordered,
     across the files of the attempts) and are exactly the steps the tag is due at: 0 .. STEPS-1 for
     time/* on every rank and for train/* on rank 0, the step log's hold-out steps for
     eval/holdout_loss on rank 0; rank R > 0 has no train/* or eval/* tag. With --stopped-early
     (a rank that stopped writing events mid-run, its disk full): 0 .. K-1 instead, where K, the
     rank's last event step + 1, is at least 1 and below STEPS (the same K for every tag of a rank).
  3. Every value equals the step log's value of that step cast to float32, exactly: the trainer
     writes float(the double it logged), and the step log's JSON keeps the double exactly (shortest
     round-trip digits), so the only difference allowed is that one rounding to float32; NaN (null in
     the step log) matches NaN. time/compute_s is fwd_s + bwd_s + opt_s added in that order in
     double, as the trainer adds them.
"""
import glob
import json
import math
import os
import sys

import numpy as np
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util

RANK_TAGS = {
    "time/data_s": lambda r: r["data_s"],
    "time/compute_s": lambda r: r["fwd_s"] + r["bwd_s"] + r["opt_s"],
    "time/comm_exposed_s": lambda r: r["comm_exposed_s"],
}
JOB_TAGS = {
    "train/loss": lambda r: r["loss"],
    "train/learning_rate": lambda r: r["lr"],
    "train/grad_norm": lambda r: r["grad_norm"],
    "train/tokens_per_s": lambda r: r["tokens_per_s"],
    "train/mfu": lambda r: r["mfu"],
}
HOLDOUT_TAG = "eval/holdout_loss"

failures = []


def check(ok, message):
    print(("ok: " if ok else "FAIL: ") + message)
    if not ok:
        failures.append(message)
    return ok


def read_step_log(path):
    """step -> the step's last record (the step log's rule: the last line of a step wins)."""
    records = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn line of a killed rank
            if isinstance(j.get("step"), int):
                records[j["step"]] = j
    return records


def as_float32(value):
    return np.float32(math.nan if value is None else value)


def same_float32(got, want):
    return (math.isnan(got) and math.isnan(want)) or got == want


def read_events(folder):
    """tag -> [(step, float32 value)] in read order, and the problems of the files' form."""
    series = {}
    files = sorted(f for f in glob.glob(os.path.join(folder, "*")) if "tfevents" in os.path.basename(f))
    form_ok = bool(files)
    for path in files:
        events = list(EventFileLoader(path).Load())
        if not events or events[0].file_version != "brain.Event:2":
            form_ok = check(False, "%s does not start with the file-version record brain.Event:2" % path)
        for event in events[1:]:
            for value in event.summary.value:
                array = tensor_util.make_ndarray(value.tensor)
                if value.metadata.plugin_data.plugin_name != "scalars" or array.shape != () or array.dtype != np.float32:
                    form_ok = check(False, "%s step %d %s is not a float32 scalar of the scalars plugin" %
                                    (path, event.step, value.tag))
                series.setdefault(value.tag, []).append((event.step, np.float32(array.item())))
    return files, series, form_ok


def main():
    run_dir, world, logged_steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    stopped_early = sys.argv[4:] == ["--stopped-early"]
    for rank in range(world):
        folder = os.path.join(run_dir, "tensorboard", "rank_%d" % rank)
        log = read_step_log(os.path.join(run_dir, "steps.rank%d.jsonl" % rank))
        files, series, form_ok = read_events(folder)
        check(form_ok, "rank %d: %d event files, each opened by brain.Event:2, every value a float32 scalar" %
              (rank, len(files)))
        steps = logged_steps
        if stopped_early:
            steps = 1 + max((s for tag in RANK_TAGS for s, _ in series.get(tag, [])), default=-1)
            check(1 <= steps < logged_steps, "rank %d: events of steps 0..%d, stopped before step %d" %
                  (rank, steps - 1, logged_steps - 1))
            check(sorted(log) == list(range(logged_steps)), "rank %d: the step log has every step 0..%d" %
                  (rank, logged_steps - 1))
        due = {tag: list(range(steps)) for tag in RANK_TAGS}
        if rank == 0:
            due.update({tag: list(range(steps)) for tag in JOB_TAGS})
            due[HOLDOUT_TAG] = sorted(s for s, r in log.items() if r.get("holdout_loss") is not None and s < steps)
            check(len(due[HOLDOUT_TAG]) > 0, "rank 0: the step log has hold-out evaluations (%s)" % due[HOLDOUT_TAG])
        check(sorted(series) == sorted(due), "rank %d: tags %s" % (rank, sorted(series)))
        extractors = dict(RANK_TAGS, **JOB_TAGS, **{HOLDOUT_TAG: lambda r: r["holdout_loss"]})
        compared = 0
        for tag, want_steps in sorted(due.items()):
            got = series.get(tag, [])
            got_steps = [s for s, _ in got]
            check(all(a < b for a, b in zip(got_steps, got_steps[1:])),
                  "rank %d %s: steps strictly increasing in read order %s" % (rank, tag, got_steps))
            check(got_steps == want_steps, "rank %d %s: every due step once (want %s)" % (rank, tag, want_steps))
            wrong = []
            for step, value in got:
                if step not in log:
                    wrong.append("step %d not in the step log" % step)
                    continue
                want = as_float32(extractors[tag](log[step]))
                compared += 1
                if not same_float32(value, want):
                    wrong.append("step %d: event %r, step log %r" % (step, float(value), float(want)))
            check(not wrong, "rank %d %s: every value equals the step log's as float32%s" %
                  (rank, tag, "" if not wrong else ": " + "; ".join(wrong[:3])))
        print("  rank %d: %d values compared with %s" % (rank, compared, os.path.join(run_dir, "steps.rank%d.jsonl" % rank)))
    extra = sorted(set(glob.glob(os.path.join(run_dir, "tensorboard", "rank_*"))) -
                   {os.path.join(run_dir, "tensorboard", "rank_%d" % r) for r in range(world)})
    check(not extra, "no rank folders beyond the world (%s)" % extra)
    if failures:
        print("%d checks failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
