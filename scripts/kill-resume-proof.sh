#!/usr/bin/env bash
# Kill-and-resume proof (contract 5 and 6 of docs/ARCHITECTURE.md): a deterministic training job run straight through,
# then the same job under scripts/run-resilient.sh while SIGKILL hits a random rank at random
# steps (seeded: the plan is printed), --save-kills of the kills landing in the middle of a
# checkpoint write.
#
# The invariant (the verdict's first line): the final checkpoint of the resilient run (parameters
# AND optimizer moments) is BITWISE equal to the uninterrupted run's by equiv-check; every attempt
# after a mid-write kill resumed from the previous valid checkpoint (the one `latest` named when
# the kill landed), never the interrupted write; every node loss changed the world size as planned
# and restarts.json logs it. A violation is lost progress: "FAIL (progress lost)".
#
# One kill per attempt: after each kill the killer waits for the NEXT attempt's first step on the
# planned rank before it fires again, so two planned kills a step apart (a kill during a save,
# then a step kill or a node loss) hit two attempts and cause two restarts. The count check (the
# verdict's second line) compares what happened with the plan: every planned kill fired, each in
# its own attempt and ending it, each planned mid-write kill interrupted a write, and the launcher
# logged at least one restart per kill (more are unplanned failures, reported). A mismatch there
# with the invariant holding is "FAIL (harness inconsistency, nothing lost)": the proof did not
# exercise what it planned, but no progress was lost.
#
# Elastic restarts (--shrink W1,W2,...): that many of the kills are "node lost" events: the
# killer first lowers the capacity the launcher's --capacity-cmd reports to W1 (then W2, ...),
# so run-resilient.sh --min-ranks restarts on the smaller world size (grad_accum absorbs it; the
# global batch must divide by each). The final state must still be BITWISE the uninterrupted
# run's (deterministic mode, any W).
#
# Usage: scripts/kill-resume-proof.sh [--np N] [--steps S] [--kills K] [--seed X] [--ckpt-every C]
#                                     [--d-model D] [--global-batch G] [--save-kills S]
#                                     [--shrink W1,W2,...] [--plan FILE] [--bin BIN_DIR]
#                                     [--work DIR] [--report FILE]
# Defaults: 2 ranks, 24 steps, 3 kills, seed 1, a checkpoint every 3 steps, d_model 64, global
# batch 8 (micro-batch 1), 1 save kill, no shrink, build/bin, a temporary folder. Exit 0 when the
# proof holds; 1 with the reason when not (progress lost, or a harness inconsistency); 2 for a
# usage error.
# --plan FILE: the kills to make instead of a seeded plan, one per line "RANK STEP MODE CAPACITY"
#   (MODE step or during-save; CAPACITY - or the ranks left after a node loss; steps increasing,
#   each RANK below the world size running then; '#' starts a comment). --kills, --save-kills
#   and --shrink are then taken from the plan (--seed is unused).
# --report FILE: when the proof holds, also write {"proof": "holds", ...} there (release-gate's
# kill_resume evidence); an existing FILE is removed first, so a failed proof never leaves a pass.
# Files in --work: kills.jsonl (one object per kill: rank, pid, attempt, mode, the interrupted
# checkpoint, `latest` at the kill, the outcome), killer.log, restarts.json (the launcher's log),
# run.log, run/attempt<N>.log, ref.log.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
np=2 steps=24 kills=3 seed=1 every=3 dmodel=64 global=8 save_kills=1 shrink="" bin="$here/build/bin" work="" report=""
plan_file=""
while (($#)); do
  case "$1" in
    --np) np=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --kills) kills=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;; --ckpt-every) every=$2; shift 2 ;; --d-model) dmodel=$2; shift 2 ;;
    --global-batch) global=$2; shift 2 ;; --save-kills) save_kills=$2; shift 2 ;; --shrink) shrink=$2; shift 2 ;;
    --plan) plan_file=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;; --work) work=$2; shift 2 ;; --report) report=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "kill-resume-proof.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -z "$report" ] || rm -f "$report"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ -x "$bin/ddp-train" ] || { echo "kill-resume-proof.sh: $bin/ddp-train not found: build first (scripts/setup.sh)" >&2; exit 2; }
[ -z "$plan_file" ] || [ -r "$plan_file" ] || { echo "kill-resume-proof.sh: --plan $plan_file: no such readable file" >&2; exit 2; }
say() { echo "kill-resume-proof: $*"; }

# The kill plan: K (rank, step, mode, capacity) lines at increasing steps. Seeded: --save-kills of
# them, spread evenly, wait for a checkpoint write in progress (a step_*.tmp folder) instead of a
# step; the --shrink ones, spread evenly among the others, first lower the capacity ("node
# lost"); ranks are drawn from the world size running at that point. Or read from --plan FILE
# and checked the same way. Exit 2 (before any training) when the plan cannot be carried out.
plan=$(python3 - "$seed" "$kills" "$np" "$steps" "$save_kills" "$shrink" "$plan_file" "$global" <<'PY'
import random, sys
seed, kills, np_, steps, saves = map(int, sys.argv[1:6])
shrink = [int(w) for w in sys.argv[6].split(",") if w]
plan_file, global_batch = sys.argv[7], int(sys.argv[8])
def die(msg):
    print(f"kill-resume-proof.sh: {msg}", file=sys.stderr); sys.exit(2)
if plan_file:
    lines = []
    for n, raw in enumerate(open(plan_file), 1):
        words = raw.split("#")[0].split()
        if not words:
            continue
        if (len(words) != 4 or not words[0].isdigit() or not words[1].isdigit()
                or words[2] not in ("step", "during-save") or not (words[3] == "-" or words[3].isdigit())):
            die(f"--plan {plan_file} line {n}: expected 'RANK STEP step|during-save -|CAPACITY', got '{raw.strip()}'")
        lines.append(words)
    if not lines:
        die(f"--plan {plan_file}: no kills in it")
else:
    if kills < saves + len(shrink) or kills > steps - 3:
        die(f"{kills} kills cannot hold {saves} save kills and {len(shrink)} node losses in {steps} steps")
    rng = random.Random(seed)
    points = sorted(rng.sample(range(2, steps - 1), kills))
    save_at = {round((j + 0.5) * kills / saves) for j in range(saves)} if saves else set()
    others = [i for i in range(kills) if i not in save_at]
    lost_at = {others[round((j + 1) * len(others) / (len(shrink) + 1)) - 1]: w for j, w in enumerate(shrink)}
    if len(lost_at) != len(shrink):
        die(f"{kills} kills are too few to place {len(shrink)} node losses apart")
    lines, world = [], np_
    for i, s in enumerate(points):
        lines.append([str(rng.randrange(world)), str(s), "during-save" if i in save_at else "step", str(lost_at.get(i, "-"))])
        world = lost_at.get(i, world)
world, last = np_, 0
for rank, step, mode, lost in lines:
    if int(rank) >= world:
        die(f"the kill of rank {rank} at step {step}: only {world} ranks run then")
    if not last < int(step) < steps:
        die(f"the kill at step {step}: steps must increase and stay below --steps {steps}")
    if lost != "-" and not 1 <= int(lost) < world:
        die(f"the node loss at step {step}: capacity {lost} must be below the {world} ranks running then")
    if lost != "-" and global_batch % int(lost):
        die(f"the node loss at step {step}: capacity {lost} does not divide --global-batch {global_batch} "
            "(the launcher would pick another world size)")
    world, last = (int(lost) if lost != "-" else world), int(step)
for words in lines:
    print(*words)
PY
) || exit 2
if [ -n "$plan_file" ]; then
  kills=$(echo "$plan" | wc -l)
  save_kills=$(echo "$plan" | awk '$3 == "during-save"' | wc -l)
  shrink=$(echo "$plan" | awk '$4 != "-" { printf "%s%s", sep, $4; sep = "," }')
  origin="from $plan_file"
else
  origin="seed $seed"
fi
if [ -z "$work" ]; then work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
rm -rf "$work" && mkdir -p "$work"

"$bin/data-prep" --synthetic markov --documents 20 --doc-tokens 4000 -o "$work/markov.h5" >/dev/null 2>&1
train=(mpirun -np "$np" --oversubscribe "$bin/ddp-train" --data "$work/markov.h5" --seq-len 32 --d-model "$dmodel"
       --layers 2 --heads 2 --global-batch "$global" --micro-batch 1 --steps "$steps" --deterministic
       --ckpt-every "$every" --keep 100 --peak-gflops 100 --log-every 1000)

say "reference: $steps steps uninterrupted on $np ranks"
"${train[@]}" --run-dir "$work/ref" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; echo "FAIL: the reference run failed" >&2; exit 1; }

say "kill plan ($origin): $(echo "$plan" | awk '{printf "rank %s at step %s (%s%s); ", $1, $2, $3, ($4 == "-" ? "" : ", node lost: capacity " $4)}')"
say "one kill per attempt: after a kill the killer waits for the next attempt's first step before it fires again"
echo "$np" >"$work/capacity"

# The killer: watches the launcher's attempt logs, the step logs and the checkpoint folder, and
# SIGKILLs one rank per planned kill, each in its own attempt. An attempt is known by its log
# (run/attempt<N>.log, created by the launcher just before it launches attempt N, after attempt
# N-1 has exited): a step record written after that log appeared belongs to attempt N. After each
# kill it waits for the next attempt (or the end of the run, run.done) and records whether a
# mid-write kill really interrupted the write (no committed step folder) in kills.jsonl.
python3 - "$work/run" "$plan" "$work/capacity" "$work/kills.jsonl" "$work/run.done" >"$work/killer.log" 2>&1 <<'PY' &
import json, os, signal, sys, time, glob
run, plan, capacity, kills_out, done = sys.argv[1], [l.split() for l in sys.argv[2].splitlines() if l.strip()], *sys.argv[3:]
ckpt = os.path.join(run, "checkpoints")
seen = []  # seen[N]: when this killer first saw attempt N's log (it polls every few ms)
def attempt():
    while os.path.exists(os.path.join(run, f"attempt{len(seen)}.log")):
        seen.append(time.time())
    return len(seen) - 1
def last_record(rank):
    try:
        with open(os.path.join(run, f"steps.rank{rank}.jsonl")) as f:
            lines = f.read().splitlines()
        return json.loads(lines[-1]) if lines else None
    except (FileNotFoundError, ValueError):
        return None
def fresh_tmp(since):  # a step_*.tmp written in this attempt (one left by an earlier kill is stale)
    for tmp in sorted(glob.glob(os.path.join(ckpt, "step_*.tmp")), reverse=True):
        try:
            if os.stat(tmp).st_mtime > since:
                return tmp
        except FileNotFoundError:
            pass
    return None
def latest():
    try:
        return open(os.path.join(ckpt, "latest")).read().strip() or None
    except FileNotFoundError:
        return None
deadline = time.time() + 120 + 60 * len(plan)  # a loaded machine: a generous bound, only against a hung run
killed_attempt = -1
out = open(kills_out, "w")
for index, (rank, step, mode, lost) in enumerate(plan):
    rank, step = int(rank), int(step)
    kill = None
    while kill is None and time.time() < deadline and not os.path.exists(done):
        now_attempt = attempt()
        rec = last_record(rank) if now_attempt > killed_attempt else None
        if (rec and rec["time"] > seen[now_attempt] and rec["step"] + 1 >= step
                and os.path.exists(f"/proc/{rec['pid']}")):
            tmp = fresh_tmp(seen[now_attempt]) if mode == "during-save" else None
            if mode == "during-save" and not tmp:
                time.sleep(0.0005)
                continue
            kill = {"index": index + 1, "rank": rank, "pid": rec["pid"], "attempt": now_attempt, "mode": mode,
                    "planned_step": step, "after_step": rec["step"] + 1, "lost": None if lost == "-" else int(lost),
                    "latest_at_kill": latest(),
                    "interrupted": os.path.basename(tmp)[:-len(".tmp")] if tmp else None}
            if lost != "-":
                with open(capacity + ".tmp", "w") as f:
                    f.write(lost + "\n")
                os.replace(capacity + ".tmp", capacity)
            os.kill(rec["pid"], signal.SIGKILL)
            where = f"during the write of {kill['interrupted']}.tmp" if tmp else f"after step {kill['after_step']}"
            print(f"kill {index + 1}: rank {rank} pid {rec['pid']} in attempt {now_attempt} {where}"
                  + (f"; node lost: capacity now {lost} ranks" if lost != "-" else ""), flush=True)
            killed_attempt = now_attempt
        else:
            time.sleep(0.002)
    if kill is None:
        print(f"kill {index + 1} (rank {rank} at step {step}, {mode}) never fired: "
              + ("the run ended first" if os.path.exists(done) else "timed out waiting for it"), flush=True)
        break
    # Wait until the killed attempt is over (the next one's log, or the run's end) to see whether
    # the write it was in committed anyway (the killed rank had done its part).
    while attempt() <= killed_attempt and not os.path.exists(done) and time.time() < deadline:
        time.sleep(0.002)
    if kill["interrupted"]:
        committed = os.path.isdir(os.path.join(ckpt, kill["interrupted"]))
        kill["outcome"] = "committed anyway" if committed else "write interrupted"
        print(f"  the write of {kill['interrupted']}: {kill['outcome']}; `latest` named {kill['latest_at_kill']} at the kill", flush=True)
    out.write(json.dumps(kill) + "\n"); out.flush()
print("killer done", flush=True)
PY
killer=$!

say "resilient run: the same job under run-resilient.sh"
elastic=()
[ -n "$shrink" ] && elastic=(--min-ranks 1 --capacity-cmd "cat $work/capacity" --rank-failures 1000)
# No backoff: with 20 kills the launcher's exponential backoff (for crash loops) would reach its
# 60 s cap; the restart times it records exclude the backoff anyway.
run_status=0
"$here/scripts/run-resilient.sh" --max-restarts $((kills + 2)) --backoff 0 --log "$work/restarts.json" "${elastic[@]}" -- \
  "${train[@]}" --run-dir "$work/run" >"$work/run.log" 2>&1 || run_status=$?
touch "$work/run.done"
wait $killer || true
sed 's/^/  /' "$work/killer.log"
[ "$run_status" -eq 0 ] || tail -20 "$work/run.log" | sed 's/^/  run.log: /'

# The final state against the uninterrupted run's (only when the resilient run finished).
final=$(printf 'step_%08d' "$steps")
: >"$work/equiv.out"
equiv_status=-1
if [ "$run_status" -eq 0 ]; then
  equiv_status=0
  "$bin/equiv-check" "$work/run/checkpoints/$final/index.h5" "$work/ref/checkpoints/$final/index.h5" --group tensors \
    >"$work/equiv.out" 2>&1 || equiv_status=$?
fi

# The verdict: the invariant first, then the count check beside it; exit 1 when either fails.
python3 - "$work" "$run_status" "$equiv_status" "$np" "$steps" "$kills" "$save_kills" "$shrink" "$final" "$seed" \
  "${report:-}" "$origin" <<'PY'
import json, os, re, sys, time
work, run_status, equiv_status, np_, steps, kills, save_kills, shrink, final, seed, report, origin = sys.argv[1:]
run_status, equiv_status, np_, kills, save_kills = map(int, (run_status, equiv_status, np_, kills, save_kills))
shrink = [int(w) for w in shrink.split(",") if w]
say = lambda s: print(f"kill-resume-proof: {s}")
fired = [json.loads(l) for l in open(os.path.join(work, "kills.jsonl")) if l.strip()]
try:
    restarts = json.load(open(os.path.join(work, "restarts.json")))["restarts"]
except (FileNotFoundError, ValueError, KeyError):
    restarts = []
by_attempt = {r["attempt"]: r for r in restarts}
for r in restarts:
    rs = f"{r['restart_s']:.2f} s" if r["restart_s"] is not None else "n/a"
    w = f", W {r['previous_world_size']} -> {r['world_size']}" if "world_size" in r else ""
    print(f"  restart {r['attempt']}: previous exit {r['previous_exit_status']}, failed rank {r['failed_rank']}, "
          f"resumed from {r['resumed_from']}, restart time {rs}{w}")
def resumed_with(attempt):  # the checkpoint the attempt's "resume: using checkpoint" line names
    try:
        m = re.search(r"resume: using checkpoint (\S+)", open(os.path.join(work, "run", f"attempt{attempt}.log")).read())
    except FileNotFoundError:
        return None
    return os.path.basename(m.group(1)) if m else None

# The invariant. lost: what shows progress lost; held: what was shown to hold.
lost, held = [], []
equiv = open(os.path.join(work, "equiv.out")).read()
compared = re.search(r"^# ([0-9]+) compared", equiv, re.M)
tensors = f", {compared.group(1)} tensors" if compared else ""
if run_status != 0:
    lost.append(f"the resilient run did not finish (exit {run_status}; see {work}/run.log)")
elif equiv_status != 0 or not re.search(r"^verdict: BITWISE", equiv, re.M):
    print(equiv.rstrip())
    verdict = re.search(r"^verdict: .*", equiv, re.M)
    lost.append(f"final {final} is not BITWISE equal to the uninterrupted run's ({verdict.group(0) if verdict else 'equiv-check exit ' + str(equiv_status)})")
else:
    held.append(f"final {final} (parameters and optimizer moments{tensors}) BITWISE equal to the uninterrupted run")
mid_write = [k for k in fired if k.get("outcome") == "write interrupted"]
notes = []
for k in mid_write:
    used = resumed_with(k["attempt"] + 1)
    if used is None and k["latest_at_kill"] is None:
        notes.append(f"{k['interrupted']} -> attempt {k['attempt'] + 1} started fresh (no checkpoint before it)")
    elif used is None:
        lost.append(f"attempt {k['attempt'] + 1}, after the kill during the write of {k['interrupted']}, did not resume from a checkpoint")
    elif used == k["interrupted"]:
        lost.append(f"attempt {k['attempt'] + 1} resumed from the interrupted {k['interrupted']}")
    elif used != k["latest_at_kill"]:
        lost.append(f"attempt {k['attempt'] + 1} resumed from {used}, not the previous valid checkpoint {k['latest_at_kill']} "
                    f"(the kill interrupted {k['interrupted']})")
    else:
        notes.append(f"{k['interrupted']} -> attempt {k['attempt'] + 1} used {used}")
if mid_write and len(notes) == len(mid_write):
    held.append(f"{len(mid_write)} mid-write kills, each resumed from the previous valid checkpoint ({'; '.join(notes)})")
if shrink:
    path = [r["world_size"] for r in restarts if "world_size" in r and r["world_size"] != r["previous_world_size"]]
    unlogged = [k for k in fired if k["lost"] is not None and
                by_attempt.get(k["attempt"] + 1, {}).get("world_size") != k["lost"]]
    if path != shrink[:len(path)] or unlogged or (run_status == 0 and path != shrink):
        lost.append(f"world sizes changed to {path}, planned {shrink}"
                    + "".join(f"; the node loss in attempt {k['attempt']} (capacity {k['lost']}) is not logged by restart {k['attempt'] + 1}" for k in unlogged))
    else:
        held.append(f"world size {' -> '.join(map(str, [np_] + path))}, each change logged in restarts.json")

# The count check: did the run do what the plan said?
harness = []
attempts = [k["attempt"] for k in fired]
if len(fired) != kills:
    harness.append(f"{len(fired)} of {kills} planned kills fired (see killer.log)")
if len(set(attempts)) != len(attempts):
    harness.append(f"two kills hit one attempt (attempts {attempts})")
not_ending = [k for k in fired if by_attempt.get(k["attempt"] + 1, {}).get("previous_exit_status", 0) == 0]
if not_ending:
    harness.append("kills that did not end their attempt: " + ", ".join(f"kill {k['index']} (attempt {k['attempt']})" for k in not_ending))
late = [k for k in fired if k.get("outcome") == "committed anyway"]
if late:
    harness.append("planned mid-write kills whose write committed anyway: " + ", ".join(f"{k['interrupted']} (kill {k['index']})" for k in late))
if len(mid_write) + len(late) != save_kills or len([k for k in fired if k["mode"] == "during-save"]) != save_kills:
    harness.append(f"{len(mid_write)} kills interrupted a write, planned {save_kills}")
if len(restarts) < len(fired):
    harness.append(f"only {len(restarts)} restarts for {len(fired)} kills, each in its own attempt")
unplanned = len(restarts) - (len(fired) - len(not_ending))
count = (f"{len(fired)} of {kills} planned kills fired, in {len(set(attempts))} distinct attempts; "
         f"{len(restarts)} restarts" + (f" ({unplanned} not caused by a planned kill)" if unplanned > 0 else ""))

# Report: the invariant first, the count check beside it.
if lost:
    say("invariant: VIOLATED -- progress lost")
    for s in lost: print(f"  LOST: {s}")
    for s in held: print(f"  holds: {s}")
else:
    say("invariant: HOLDS")
    for s in held: print(f"  {s}")
say(f"count check ({origin}, one kill per attempt): {count}: " + ("consistent" if not harness else "INCONSISTENT"))
for s in harness: print(f"  harness: {s}")
if lost:
    print("FAIL (progress lost): " + lost[0], file=sys.stderr); sys.exit(1)
if harness:
    print("FAIL (harness inconsistency, nothing lost: the invariant holds): " + harness[0], file=sys.stderr); sys.exit(1)
say(f"PROOF HOLDS: {final} BITWISE; {len(restarts)} restarts for {len(fired)} kills ({len(mid_write)} mid-write"
    + (f", world size {np_} -> {' -> '.join(map(str, shrink))}" if shrink else "") + ")")
if report:
    with open(report + ".tmp", "w") as f:
        json.dump({"proof": "holds", "verdict": "BITWISE", "np": np_, "steps": int(steps), "kills": kills,
                   "seed": int(seed), "restarts": len(restarts), "final": final,
                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "by": "scripts/kill-resume-proof.sh"}, f)
        f.write("\n")
    os.replace(report + ".tmp", report)
PY
