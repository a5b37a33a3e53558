#!/usr/bin/env bash
# Kill-and-resume proof (contract 5 and 6 of docs/ARCHITECTURE.md): a deterministic training job run straight through,
# then the same job under scripts/run-resilient.sh while SIGKILL hits a random rank at random
# steps (seeded: the plan is printed), --save-kills of the kills landing in the middle of a
# checkpoint write. The final checkpoints of both runs (parameters AND optimizer moments) must be
# BITWISE equal by equiv-check, and every run after a mid-write kill must have resumed from the
# previous valid checkpoint.
#
# Elastic restarts (--shrink W1,W2,...): that many of the kills are "node lost" events: the
# killer first lowers the capacity the launcher's --capacity-cmd reports to W1 (then W2, ...),
# so run-resilient.sh --min-ranks restarts on the smaller world size (grad_accum absorbs it; the
# global batch must divide by each). The restart log must show each old -> new world size, and
# the final state must still be BITWISE the uninterrupted run's (deterministic mode, any W).
#
# Usage: scripts/kill-resume-proof.sh [--np N] [--steps S] [--kills K] [--seed X] [--ckpt-every C]
#                                     [--d-model D] [--global-batch G] [--save-kills S]
#                                     [--shrink W1,W2,...] [--bin BIN_DIR] [--work DIR] [--report FILE]
# Defaults: 2 ranks, 24 steps, 3 kills, seed 1, a checkpoint every 3 steps, d_model 64, global
# batch 8 (micro-batch 1), 1 save kill, no shrink, build/bin, a temporary folder. Exit 0 when the
# proof holds; 1 with the reason when not.
# --report FILE: when the proof holds, also write {"proof": "holds", ...} there (release-gate's
# kill_resume evidence); an existing FILE is removed first, so a failed proof never leaves a pass.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
np=2 steps=24 kills=3 seed=1 every=3 dmodel=64 global=8 save_kills=1 shrink="" bin="$here/build/bin" work="" report=""
while (($#)); do
  case "$1" in
    --np) np=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --kills) kills=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;; --ckpt-every) every=$2; shift 2 ;; --d-model) dmodel=$2; shift 2 ;;
    --global-batch) global=$2; shift 2 ;; --save-kills) save_kills=$2; shift 2 ;; --shrink) shrink=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;; --work) work=$2; shift 2 ;; --report) report=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "kill-resume-proof.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -z "$report" ] || rm -f "$report"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ -x "$bin/ddp-train" ] || { echo "kill-resume-proof.sh: $bin/ddp-train not found: build first (scripts/setup.sh)" >&2; exit 2; }
if [ -z "$work" ]; then work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
rm -rf "$work" && mkdir -p "$work"
say() { echo "kill-resume-proof: $*"; }

"$bin/data-prep" --synthetic markov --documents 20 --doc-tokens 4000 -o "$work/markov.h5" >/dev/null 2>&1
train=(mpirun -np "$np" --oversubscribe "$bin/ddp-train" --data "$work/markov.h5" --seq-len 32 --d-model "$dmodel"
       --layers 2 --heads 2 --global-batch "$global" --micro-batch 1 --steps "$steps" --deterministic
       --ckpt-every "$every" --keep 100 --peak-gflops 100 --log-every 1000)

say "reference: $steps steps uninterrupted on $np ranks"
"${train[@]}" --run-dir "$work/ref" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }

# The kill plan: K (rank, step, mode, capacity) lines at increasing steps, seeded. --save-kills of
# them, spread evenly, wait for a checkpoint write in progress (a step_*.tmp folder) instead of a
# step; the --shrink ones, spread evenly among the others, first lower the capacity ("node
# lost"). Ranks are drawn from the world size running at that point.
plan=$(python3 - "$seed" "$kills" "$np" "$steps" "$save_kills" "$shrink" <<'PY'
import random, sys
seed, kills, np_, steps, saves = map(int, sys.argv[1:6])
shrink = [int(w) for w in sys.argv[6].split(",") if w]
if kills < saves + len(shrink) or kills > steps - 3:
    sys.exit(f"kill-resume-proof.sh: {kills} kills cannot hold {saves} save kills and {len(shrink)} node losses in {steps} steps")
rng = random.Random(seed)
points = sorted(rng.sample(range(2, steps - 1), kills))
save_at = {round((j + 0.5) * kills / saves) for j in range(saves)} if saves else set()
others = [i for i in range(kills) if i not in save_at]
lost_at = {others[round((j + 1) * len(others) / (len(shrink) + 1)) - 1]: w for j, w in enumerate(shrink)}
if len(lost_at) != len(shrink):
    sys.exit(f"kill-resume-proof.sh: {kills} kills are too few to place {len(shrink)} node losses apart")
world = np_
for i, s in enumerate(points):
    mode = "during-save" if i in save_at else "step"
    print(rng.randrange(world), s, mode, lost_at.get(i, "-"))
    world = lost_at.get(i, world)
PY
)
say "kill plan (seed $seed): $(echo "$plan" | awk '{printf "rank %s at step %s (%s%s); ", $1, $2, $3, ($4 == "-" ? "" : ", node lost: capacity " $4)}')"
echo "$np" >"$work/capacity"

# The killer: watches the resilient run's step logs and checkpoint folder, SIGKILLs one rank per
# planned point, and records what it did.
python3 - "$work/run" "$plan" "$work/capacity" >"$work/killer.log" 2>&1 <<'PY' &
import json, os, signal, sys, time, glob
run, plan, capacity = sys.argv[1], [l.split() for l in sys.argv[2].splitlines() if l.strip()], sys.argv[3]
ckpt = os.path.join(run, "checkpoints")
def last_record(rank):
    try:
        with open(os.path.join(run, f"steps.rank{rank}.jsonl")) as f:
            lines = f.read().splitlines()
        return json.loads(lines[-1]) if lines else None
    except (FileNotFoundError, ValueError):
        return None
killed = set()
deadline = time.time() + 120 + 60 * len(plan)  # a loaded machine: a generous bound, only against a hung run
for rank, step, mode, lost in plan:
    rank, step = int(rank), int(step)
    while time.time() < deadline:
        rec = last_record(rank)
        alive = rec and rec["pid"] not in killed and os.path.exists(f"/proc/{rec['pid']}")
        if alive and rec["step"] + 1 >= step:
            if mode == "during-save":
                tmp = glob.glob(os.path.join(ckpt, "step_*.tmp"))
                if not tmp:
                    time.sleep(0.0005)
                    continue
                print(f"kill rank {rank} pid {rec['pid']} during the write of {os.path.basename(tmp[0])}", flush=True)
            else:
                print(f"kill rank {rank} pid {rec['pid']} after step {rec['step'] + 1}", flush=True)
            if lost != "-":
                with open(capacity + ".tmp", "w") as f:
                    f.write(lost + "\n")
                os.replace(capacity + ".tmp", capacity)
                print(f"node lost: capacity now {lost} ranks", flush=True)
            os.kill(rec["pid"], signal.SIGKILL)
            killed.add(rec["pid"])
            time.sleep(0.3)
            break
        time.sleep(0.002)
print("killer done", flush=True)
PY
killer=$!

say "resilient run: the same job under run-resilient.sh"
elastic=()
[ -n "$shrink" ] && elastic=(--min-ranks 1 --capacity-cmd "cat $work/capacity" --rank-failures 1000)
# No backoff: with 20 kills the launcher's exponential backoff (for crash loops) would reach its
# 60 s cap; the restart times it records exclude the backoff anyway.
"$here/scripts/run-resilient.sh" --max-restarts $((kills + 2)) --backoff 0 --log "$work/restarts.json" "${elastic[@]}" -- \
  "${train[@]}" --run-dir "$work/run" >"$work/run.log" 2>&1 || { cat "$work/run.log"; kill $killer 2>/dev/null; exit 1; }
wait $killer || true
sed 's/^/  /' "$work/killer.log"
python3 - "$work/restarts.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["restarts"]:
    rs = f"{r['restart_s']:.2f} s" if r["restart_s"] is not None else "n/a"
    w = f", W {r['previous_world_size']} -> {r['world_size']}" if "world_size" in r else ""
    print(f"  restart {r['attempt']}: previous exit {r['previous_exit_status']}, failed rank {r['failed_rank']}, "
          f"resumed from {r['resumed_from']}, restart time {rs}{w}")
PY
restarts=$(python3 -c "import json; print(len(json.load(open('$work/restarts.json'))['restarts']))")
[ "$restarts" -ge "$kills" ] || { echo "FAIL: only $restarts restarts for $kills kills" >&2; exit 1; }
# Every mid-write kill must have left the previous checkpoint in charge: kill i ends attempt i, so
# attempt i+1 must not resume from the interrupted save (a later attempt may use the same step
# once a resumed run has saved it again, completely).
i=0
while read -r line; do
  case "$line" in kill*) ;; *) continue ;; esac
  i=$((i + 1))
  interrupted=$(echo "$line" | grep -oE 'write of step_[0-9]+' | grep -oE 'step_[0-9]+' || true)
  [ -n "$interrupted" ] || continue
  used=$(grep -oE 'resume: using checkpoint [^ ]+' "$work/run/attempt$i.log" | head -1)
  [ -n "$used" ] || { echo "FAIL: attempt $i after the kill during the write of $interrupted did not resume" >&2; exit 1; }
  [[ "$used" == */$interrupted ]] && { echo "FAIL: attempt $i resumed from the interrupted $interrupted" >&2; exit 1; }
  say "the kill during the write of $interrupted left the previous checkpoint in charge (attempt $i: ${used##*/})"
done <"$work/killer.log"
[ "$(grep -c 'during the write of' "$work/killer.log")" -eq "$save_kills" ] ||
  { echo "FAIL: $(grep -c 'during the write of' "$work/killer.log") kills during a write, planned $save_kills" >&2; exit 1; }
# Each node loss must have moved the world size, in order: np -> W1 -> W2 ...
if [ -n "$shrink" ]; then
  path=$(python3 -c "import json; print(','.join(str(r['world_size']) for r in json.load(open('$work/restarts.json'))['restarts'] if r.get('world_size') != r.get('previous_world_size')))")
  [ "$path" = "$shrink" ] || { echo "FAIL: world sizes changed to [$path], planned [$shrink]" >&2; exit 1; }
  say "node losses moved the world size $np -> ${shrink//,/ -> }, recorded in restarts.json"
fi
final=$(printf 'step_%08d' "$steps")
out=$("$bin/equiv-check" "$work/run/checkpoints/$final/index.h5" "$work/ref/checkpoints/$final/index.h5" --group tensors 2>&1) ||
  { echo "$out"; echo "FAIL: final checkpoints differ" >&2; exit 1; }
echo "$out" | grep -E '^# [0-9]+ compared|^verdict'
echo "$out" | grep -q '^verdict: BITWISE' || { echo "FAIL: not bitwise" >&2; exit 1; }
say "PROOF HOLDS: $restarts restarts, final $final (parameters and optimizer moments) BITWISE equal to the uninterrupted run"
if [ -n "$report" ]; then
  python3 - "$report" "$np" "$steps" "$kills" "$seed" "$restarts" "$final" <<'PY'
import json, sys, time
out, np_, steps, kills, seed, restarts, final = sys.argv[1:]
with open(out + ".tmp", "w") as f:
    json.dump({"proof": "holds", "verdict": "BITWISE", "np": int(np_), "steps": int(steps), "kills": int(kills),
               "seed": int(seed), "restarts": int(restarts), "final": final,
               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "by": "scripts/kill-resume-proof.sh"}, f)
    f.write("\n")
import os; os.replace(out + ".tmp", out)
PY
fi
