#!/usr/bin/env bash
# The randomised fault matrix of issue 24: N cases drawn from a seeded generator over the world size
# (2..6), the fault (skip-collective, wrong-count, hang in compute, kill, slow-data, delay), its phase
# (data, forward, backward, optimizer, ckpt, eval), its step and rank, fast or deterministic mode,
# and the layout (DDP, ZeRO-1/2/3 through fsdp-train, TP=2 through ddp-train --tp 2). Each case runs
# once under scripts/run-resilient.sh --max-restarts 0, whose automatic verdict (hang-diagnose --json
# on the attempt's flight records) is checked:
#   - the job stops within the collective timeout + 10 s of the fault (the fault's time: the first
#     failure trigger in the records, less the timeout when that trigger was a timeout; a dead
#     rank's: the survivors' first record on mpirun's signal; the end: when the command exited);
#   - the verdict names the injected rank, the expected class and the fault's phase and step;
#   - "ambiguous" only where docs/RUNBOOK.md ("Undecidable cases") says no record can decide, with
#     that reason: a wrong count at W=2 in the first step that has the collective (two ranks, no
#     majority, no earlier step to compare with); a healthy rank is never named.
# A kill leaves no record of the dead rank, so its own phase is unknowable: its verdict's step and
# phase are those of the collective the survivors waited in (checked to be at or after the fault's step).
# The seed is printed first; `fault_matrix.sh BIN WORK SEED [N] [ONLY]` reruns the same draw (ONLY: one
# case index). Defaults: seed 24, N 40.
# Usage: fault_matrix.sh BIN_DIR WORK_DIR [SEED] [N] [ONLY]
BIN_DIR=$1 WORK=$2 SEED=${3:-24} N=${4:-40} ONLY=${5:-}
. "$(dirname "$0")/common.sh"
here="$(cd "$(dirname "$0")/../.." && pwd)"
launcher="$here/scripts/run-resilient.sh"
T=${FAULT_MATRIX_TIMEOUT:-3}  # --collective-timeout, seconds (short: every case waits for it once)
echo "fault matrix: seed $SEED, $N cases (rerun: $0 BIN_DIR WORK_DIR $SEED $N [CASE])"

# The draw: one line per case, "index W tool layout mode kind phase step rank spec expect_class".
python3 - "$SEED" "$N" "$T" >"$WORK/cases.txt" <<'PY'
import random, sys
seed, n, T = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
STEPS = 6                # --steps 6, steps 0..5
CKPT_STEPS = [1, 3]      # --ckpt-every 2: saves after steps 1 and 3 (and 5, the last: not drawn)
EVAL_STEPS = [1, 3]      # --eval-every 2
# Phases holding collectives, by layout (seen in their flight records): DDP the gradient all-reduce
# in backward; ZeRO-1/2 also the parameter all-gather in optimizer; ZeRO-3 and TP=2 collectives in
# forward, backward, optimizer and eval (parameter gathers; TP's activation all-reduces and logits
# gathers); every layout the checkpoint group's broadcast and all-gather in ckpt. (The step-end
# agreement collectives are in every step too, but step-end is not a phase of the draw.)
COLLECTIVE_PHASES = {
    "ddp": ["backward", "ckpt"],
    "zero1": ["backward", "optimizer", "ckpt"],
    "zero2": ["backward", "optimizer", "ckpt"],
    "zero3": ["forward", "backward", "optimizer", "ckpt", "eval"],
    "tp2": ["forward", "backward", "optimizer", "ckpt", "eval"],
}
ALL_PHASES = ["data", "forward", "backward", "optimizer", "ckpt", "eval"]
KINDS = ["skip-collective", "wrong-count", "hang", "kill", "slow-data", "delay"]
LAYOUTS = ["ddp", "zero1", "zero2", "zero3", "tp2"]

def steps_of(phase):
    return CKPT_STEPS if phase == "ckpt" else EVAL_STEPS if phase == "eval" else list(range(STEPS - 1))

for i in range(n):
    kind = KINDS[i % len(KINDS)]        # every kind equally often
    layout = LAYOUTS[(i // len(KINDS) + i) % len(LAYOUTS)]
    W = rng.choice([2, 4, 6]) if layout == "tp2" else rng.randint(2, 6)
    mode = rng.choice(["fast", "det"])
    rank = rng.randrange(W)
    if kind in ("skip-collective", "wrong-count"):
        phase = rng.choice(COLLECTIVE_PHASES[layout])
    elif kind == "slow-data":
        phase = "data"
    else:
        phase = rng.choice(ALL_PHASES)
    step = rng.choice(steps_of(phase))
    if kind in ("slow-data", "delay"):
        step = steps_of(phase)[0]  # a delay acts on every entry of its phase: the first one times out
        ms = 3 * 1000 * T          # three collective timeouts: a straggler beyond the timeout
        spec = f"slow-data:rank={rank},ms={ms}" if kind == "slow-data" else f"delay:rank={rank},ms={ms},phase={phase}"
    else:
        spec = f"{kind}:rank={rank},step={step},phase={phase}"
    expect = {"skip-collective": "skipped-collective", "wrong-count": "mismatch", "hang": "hang-outside-collective",
              "kill": "dead-rank", "slow-data": "hang-outside-collective", "delay": "hang-outside-collective"}[kind]
    # Undecidable (docs/RUNBOOK.md): two ranks disagree on a size in the first step that has the
    # collective: no majority, no history.
    if kind == "wrong-count" and W == 2 and step == steps_of(phase)[0]:
        expect = "ambiguous"
    tool = "fsdp-train" if layout.startswith("zero") else "ddp-train"
    print(i, W, tool, layout, mode, kind, phase, step, rank, spec, expect)
PY

results="$WORK/results.txt"
: >"$results"
failures=0
while read -r i W tool layout mode kind phase step rank spec expect; do
  [ -n "$ONLY" ] && [ "$i" != "$ONLY" ] && continue
  dir="$WORK/case$i"
  args=(--data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 --peak-gflops 100 --log-every 1000
        --steps 6 --ckpt-every 2 --eval-every 2 --micro-batch 1 --collective-timeout $T --inject "$spec"
        --run-dir "$dir")
  case "$layout" in
    zero*) args+=(--zero-stage "${layout#zero}" --global-batch $((2 * W))) ;;
    tp2) args+=(--tp 2 --global-batch $W) ;;
    *) args+=(--global-batch $((2 * W))) ;;
  esac
  [ "$mode" = det ] && args+=(--deterministic)
  start=$(date +%s.%N)
  rc=0
  "$launcher" --max-restarts 0 --backoff 0 --diagnose-bin "$BIN_DIR" -- \
    mpirun -np "$W" --oversubscribe "$BIN_DIR/$tool" "${args[@]}" >"$dir.log" 2>&1 </dev/null || rc=$?
  end=$(date +%s.%N)
  line=$(python3 - "$dir" "$rc" "$start" "$end" "$T" "$W" "$kind" "$phase" "$step" "$rank" "$expect" <<'PY'
import glob, json, sys
d, rc, start, end, T, W, kind, phase, step, rank, expect = sys.argv[1:]
rc, start, end, T, W, step, rank = int(rc), float(start), float(end), float(T), int(W), int(step), int(rank)
problems = []
try:
    v = json.load(open(d + "/attempt0.verdict.json"))
except (OSError, ValueError):
    v = {}
    problems.append("no verdict")
if rc == 0:
    problems.append("the faulty job exited 0")
# The fault's time: the first failure trigger, less T when it was a timeout.
# A dead rank's survivors may write only records on mpirun's signal: its time then.
fault_at, signal_at = None, None
for f in glob.glob(d + "/flight.attempt0/flight.rank*.json"):
    rec = json.load(open(f))
    for t in rec.get("triggers", []):
        if t["reason"] in ("timeout", "error", "exit"):
            at = t["at"] - (T if t["reason"] == "timeout" else 0)
            fault_at = at if fault_at is None else min(fault_at, at)
        elif t["reason"] == "signal":
            signal_at = t["at"] if signal_at is None else min(signal_at, t["at"])
if fault_at is None:
    fault_at = signal_at
# The job's end: when the command exited (the launcher's diagnosis comes after it).
stop_s = v.get("command_ended_at", end) - (fault_at if fault_at is not None else start)
if stop_s > T + 10:
    problems.append(f"stopped {stop_s:.1f} s after the fault (limit {T + 10:.0f} s)")
got = (v.get("class"), v.get("culprit_rank"), v.get("phase"), v.get("step"))
if v.get("culprit_rank") not in (None, rank):
    problems.append(f"a healthy rank named: {v.get('culprit_rank')}")
if expect == "ambiguous":
    if v.get("class") != "ambiguous" or v.get("culprit_rank") is not None:
        problems.append(f"expected ambiguous (no majority, no history), got {got}")
elif (v.get("class"), v.get("culprit_rank")) != (expect, rank):
    problems.append(f"expected {expect} rank {rank}, got {v.get('class')} rank {v.get('culprit_rank')}")
elif kind == "kill":
    if v.get("step") is None or v["step"] < step:
        problems.append(f"the survivors' blocked step {v.get('step')} is before the kill's {step}")
elif (v.get("phase"), v.get("step")) != (phase, step):
    problems.append(f"expected phase {phase} step {step}, got phase {v.get('phase')} step {v.get('step')}")
print(("ok  " if not problems else "FAIL") + f" | {v.get('class')} rank {v.get('culprit_rank')} phase {v.get('phase')} "
      f"step {v.get('step')} | stop {stop_s:.1f} s | diag {v.get('diagnosis_s')} s" + ("" if not problems else " | " + "; ".join(problems)))
PY
)
  row="case $i: W=$W $layout $mode $spec -> expect $expect | $line"
  echo "$row" | tee -a "$results"
  if [[ "$line" == FAIL* ]]; then
    failures=$((failures + 1))
    grep "verdict attempt" "$dir.log" >&2 || tail -5 "$dir.log" >&2
  fi
done <"$WORK/cases.txt"
total=$(wc -l <"$results")
python3 - "$results" <<'PY'
import re, statistics, sys
d = [float(m.group(1)) for m in re.finditer(r"diag ([0-9.]+) s", open(sys.argv[1]).read())]
s = [float(m.group(1)) for m in re.finditer(r"stop ([0-9.]+) s", open(sys.argv[1]).read())]
if d: print(f"diagnosis time (first trigger -> verdict line): median {statistics.median(d):.2f} s, max {max(d):.2f} s")
if s: print(f"stop time after the fault: median {statistics.median(s):.1f} s, max {max(s):.1f} s")
PY
[ "$failures" -eq 0 ] || fail "$failures of $total cases wrong (seed $SEED; rerun one: $0 BIN_DIR WORK_DIR $SEED $N CASE)"
pass "fault matrix, seed $SEED: $total cases, every verdict names the injected rank, class, phase and step"
