"""The randomised fault matrix: its draw of cases and each case's verdict."""
import glob
import json
import random
import re
import statistics

from .common import command, load, read_text


# ---- the randomised fault matrix (fault_matrix.sh) ----

FAULT_STEPS = 6              # --steps 6, steps 0..5
FAULT_CKPT_STEPS = [1, 3]    # --ckpt-every 2: saves after steps 1 and 3 (and 5, the last: not drawn)
FAULT_EVAL_STEPS = [1, 3]    # --eval-every 2
# Phases holding collectives, by layout (seen in their flight records): DDP the gradient all-reduce
# in backward; ZeRO-1/2 also the parameter all-gather in optimizer; ZeRO-3 and TP=2 collectives in
# forward, backward, optimizer and eval (parameter gathers; TP's activation all-reduces and logits
# gathers); every layout the checkpoint group's broadcast and all-gather in ckpt. (The step-end
# agreement collectives are in every step too, but step-end is not a phase of the draw.)
FAULT_COLLECTIVE_PHASES = {
    "ddp": ["backward", "ckpt"],
    "zero1": ["backward", "optimizer", "ckpt"],
    "zero2": ["backward", "optimizer", "ckpt"],
    "zero3": ["forward", "backward", "optimizer", "ckpt", "eval"],
    "tp2": ["forward", "backward", "optimizer", "ckpt", "eval"],
}
FAULT_PHASES = ["data", "forward", "backward", "optimizer", "ckpt", "eval"]
FAULT_KINDS = ["skip-collective", "wrong-count", "hang", "kill", "slow-data", "delay"]
FAULT_LAYOUTS = ["ddp", "zero1", "zero2", "zero3", "tp2"]
FAULT_CLASSES = {"skip-collective": "skipped-collective", "wrong-count": "mismatch", "hang": "hang-outside-collective",
                 "kill": "dead-rank", "slow-data": "hang-outside-collective", "delay": "hang-outside-collective"}


def fault_steps(phase):
    """The steps a fault in phase can be drawn at: the saves' for ckpt, the evaluations' for eval,
    else every step but the last."""
    return FAULT_CKPT_STEPS if phase == "ckpt" else FAULT_EVAL_STEPS if phase == "eval" else list(range(FAULT_STEPS - 1))


@command(("seed", int), ("count", int), ("timeout", int))
def fault_cases(seed, count, timeout):
    """The fault matrix's draw: count cases from random.Random(seed), one line each, "index W tool
    layout mode kind phase step rank spec expected_class". The kinds take turns and the layouts
    rotate; the world size (2, 4 or 6 for TP=2, else 2..6), mode, rank, phase and step are drawn, in
    that order (the same seed gives the same cases). A delay or slow data lasts three collective
    timeouts (timeout s) from its phase's first step. "ambiguous" where docs/RUNBOOK.md says no
    record can decide: a wrong count at W=2 in the first step that has the collective."""
    rng = random.Random(seed)
    for i in range(count):
        kind = FAULT_KINDS[i % len(FAULT_KINDS)]        # every kind equally often
        layout = FAULT_LAYOUTS[(i // len(FAULT_KINDS) + i) % len(FAULT_LAYOUTS)]
        W = rng.choice([2, 4, 6]) if layout == "tp2" else rng.randint(2, 6)
        mode = rng.choice(["fast", "det"])
        rank = rng.randrange(W)
        if kind in ("skip-collective", "wrong-count"):
            phase = rng.choice(FAULT_COLLECTIVE_PHASES[layout])
        elif kind == "slow-data":
            phase = "data"
        else:
            phase = rng.choice(FAULT_PHASES)
        step = rng.choice(fault_steps(phase))
        if kind in ("slow-data", "delay"):
            step = fault_steps(phase)[0]  # a delay acts on every entry of its phase: the first one times out
            ms = 3 * 1000 * timeout       # three collective timeouts: a straggler beyond the timeout
            spec = f"slow-data:rank={rank},ms={ms}" if kind == "slow-data" else f"delay:rank={rank},ms={ms},phase={phase}"
        else:
            spec = f"{kind}:rank={rank},step={step},phase={phase}"
        expected = FAULT_CLASSES[kind]
        # Undecidable: two ranks disagree on a size in the first step that has the collective: no
        # majority, no history.
        if kind == "wrong-count" and W == 2 and step == fault_steps(phase)[0]:
            expected = "ambiguous"
        tool = "fsdp-train" if layout.startswith("zero") else "ddp-train"
        print(i, W, tool, layout, mode, kind, phase, step, rank, spec, expected)


def fault_time(run, timeout):
    """When the fault happened, from the attempt's flight records: the first failure trigger
    (timeout, error, exit), less the timeout when it was a timeout; where there is none (a dead
    rank's survivors may write only records on mpirun's signal), the first signal; else None."""
    fault_at, signal_at = None, None
    for f in glob.glob(f"{run}/flight.attempt0/flight.rank*.json"):
        for t in load(f).get("triggers", []):
            if t["reason"] in ("timeout", "error", "exit"):
                at = t["at"] - (timeout if t["reason"] == "timeout" else 0)
                fault_at = at if fault_at is None else min(fault_at, at)
            elif t["reason"] == "signal":
                signal_at = t["at"] if signal_at is None else min(signal_at, t["at"])
    return fault_at if fault_at is not None else signal_at


@command(("run", str), ("rc", int), ("start", float), ("end", float), ("timeout", float), ("kind", str),
         ("phase", str), ("step", int), ("rank", int), ("expected", str))
def fault_case(run, rc, start, end, timeout, kind, phase, step, rank, expected):
    """One case of the fault matrix, run under run-resilient.sh --max-restarts 0 from start to end
    (epoch seconds), exit rc: prints one row, "ok  | ..." or "FAIL | ... | the problems", with the
    launcher's verdict (attempt0.verdict.json), the stop time and the diagnosis time, and exits 0
    either way (the script counts the FAIL rows). Problems: no verdict; exit 0; stopped later than
    timeout + 10 s after the fault (fault_time; the end: the verdict's command_ended_at, else end);
    a healthy rank named; not the expected class and rank (for "ambiguous": class ambiguous, no
    rank); a kill's blocked step before the kill's; otherwise not the injected phase and step."""
    problems = []
    try:
        with open(f"{run}/attempt0.verdict.json") as f:
            v = json.load(f)
    except (OSError, ValueError):
        v = {}
        problems.append("no verdict")
    if rc == 0:
        problems.append("the faulty job exited 0")
    fault_at = fault_time(run, timeout)
    stop_s = v.get("command_ended_at", end) - (fault_at if fault_at is not None else start)
    if stop_s > timeout + 10:
        problems.append(f"stopped {stop_s:.1f} s after the fault (limit {timeout + 10:.0f} s)")
    got = (v.get("class"), v.get("culprit_rank"), v.get("phase"), v.get("step"))
    if v.get("culprit_rank") not in (None, rank):
        problems.append(f"a healthy rank named: {v.get('culprit_rank')}")
    if expected == "ambiguous":
        if v.get("class") != "ambiguous" or v.get("culprit_rank") is not None:
            problems.append(f"expected ambiguous (no majority, no history), got {got}")
    elif (v.get("class"), v.get("culprit_rank")) != (expected, rank):
        problems.append(f"expected {expected} rank {rank}, got {v.get('class')} rank {v.get('culprit_rank')}")
    elif kind == "kill":
        # A kill leaves no record of the dead rank: the verdict's step is the survivors' blocked one.
        if v.get("step") is None or v["step"] < step:
            problems.append(f"the survivors' blocked step {v.get('step')} is before the kill's {step}")
    elif (v.get("phase"), v.get("step")) != (phase, step):
        problems.append(f"expected phase {phase} step {step}, got phase {v.get('phase')} step {v.get('step')}")
    print(("ok  " if not problems else "FAIL") + f" | {v.get('class')} rank {v.get('culprit_rank')} phase {v.get('phase')} "
          f"step {v.get('step')} | stop {stop_s:.1f} s | diag {v.get('diagnosis_s')} s"
          + ("" if not problems else " | " + "; ".join(problems)))


@command(("results", str))
def fault_times(results):
    """The fault matrix's rows (fault-case's, one per line): the median and largest diagnosis time
    ("diag S s") and stop time ("stop S s"), each line printed only where some row has the figure."""
    text = read_text(results)
    d = [float(m.group(1)) for m in re.finditer(r"diag ([0-9.]+) s", text)]
    s = [float(m.group(1)) for m in re.finditer(r"stop ([0-9.]+) s", text)]
    if d:
        print(f"diagnosis time (first trigger -> verdict line): median {statistics.median(d):.2f} s, max {max(d):.2f} s")
    if s:
        print(f"stop time after the fault: median {statistics.median(s):.1f} s, max {max(s):.1f} s")
