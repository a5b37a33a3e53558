#!/usr/bin/env bash
# Resilient launcher: runs a training command (mpirun ... ddp-train ... or srun ...) and, when it
# fails, restarts it from the newest valid checkpoint (the command gets `--resume auto` on every
# restart), up to --max-restarts times with an exponential backoff. Each restart is logged as
# one JSON object in --log: attempt, exit status, the failing rank where the output names one,
# the checkpoint resumed from, and the restart time (relaunch to the first completed resumed step,
# read from the rank-0 step log's wall-clock "time").
#
# Usage: scripts/run-resilient.sh [--max-restarts N] [--backoff SECONDS] [--log FILE] -- COMMAND...
#   COMMAND must contain --run-dir DIR (the step logs) and may contain --ckpt-dir DIR
#   (default DIR/checkpoints). Exit status: 0 when the command finally succeeds, else the last
#   failure's status (after the restarts ran out).
set -uo pipefail

max_restarts=3
backoff=1
log=""
while (($#)); do
  case "$1" in
    --max-restarts) max_restarts=$2; shift 2 ;;
    --backoff) backoff=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-resilient.sh: unknown option '$1' (put the command after --)" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "run-resilient.sh: no command given (usage: run-resilient.sh [options] -- COMMAND...)" >&2; exit 2; }
[[ "$max_restarts" =~ ^[0-9]+$ ]] || { echo "run-resilient.sh: --max-restarts must be a whole number" >&2; exit 2; }
command=("$@")

run_dir="" ckpt_dir=""
for ((i = 0; i < ${#command[@]}; i++)); do
  case "${command[i]}" in
    --run-dir) run_dir=${command[i+1]:-} ;;
    --ckpt-dir) ckpt_dir=${command[i+1]:-} ;;
  esac
done
[ -n "$run_dir" ] || { echo "run-resilient.sh: the command needs --run-dir DIR (where the step logs go)" >&2; exit 2; }
ckpt_dir=${ckpt_dir:-$run_dir/checkpoints}
log=${log:-$run_dir/restarts.json}
mkdir -p "$run_dir"
: >"$log.tmp"
has_resume=0
for a in "${command[@]}"; do [ "$a" = "--resume" ] && has_resume=1; done

say() { echo "run-resilient.sh: $*" >&2; }
now() { date +%s.%N; }

# First step record in the rank-0 step log written after unix time $1; prints its time or nothing.
first_step_after() {
  python3 - "$run_dir/steps.rank0.jsonl" "$1" <<'PY'
import json, sys
path, t0 = sys.argv[1], float(sys.argv[2])
try:
    for line in open(path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("time", 0) > t0:
            print(rec["time"]); break
except FileNotFoundError:
    pass
PY
}

attempt=0
status=0
while :; do
  cmd=("${command[@]}")
  ((attempt > 0 && !has_resume)) && cmd+=(--resume auto)
  resumed_from=$(cat "$ckpt_dir/latest" 2>/dev/null || true)
  launched=$(now)
  out="$run_dir/attempt$attempt.log"
  say "attempt $attempt: ${cmd[*]}"
  "${cmd[@]}" > >(tee "$out") 2>&1
  status=$?
  sleep 0.2  # let tee finish
  if ((attempt > 0)); then
    first=$(first_step_after "$launched")
    python3 - "$log.tmp" "$attempt" "$prev_status" "$prev_rank" "$resumed_from" "$launched" "${first:-}" <<'PY'
import json, sys
path, attempt, status, rank, ckpt, launched, first = sys.argv[1:]
rec = {"attempt": int(attempt), "previous_exit_status": int(status),
       "failed_rank": int(rank) if rank else None,
       "resumed_from": ckpt or None, "relaunch_time": float(launched),
       "first_resumed_step_time": float(first) if first else None,
       "restart_s": (float(first) - float(launched)) if first else None}
open(path, "a").write(json.dumps(rec) + "\n")
PY
  fi
  if ((status == 0)); then
    say "attempt $attempt succeeded"
    break
  fi
  # The failing rank: our tools' "[rank R/W] error" line, or mpirun's report of the rank that died.
  prev_rank=$(grep -oE '^\[rank [0-9]+/[0-9]+\] (error|collective timeout)' "$out" | head -1 | grep -oE '[0-9]+' | head -1)
  [ -n "$prev_rank" ] || prev_rank=$(grep -oE 'rank ([0-9]+) with PID [0-9]+ on node .* exited on signal' "$out" | head -1 |
                                     grep -oE 'rank [0-9]+' | grep -oE '[0-9]+' || true)
  prev_status=$status
  if ((attempt >= max_restarts)); then
    say "attempt $attempt failed with status $status; no restarts left (--max-restarts $max_restarts)"
    break
  fi
  wait_s=$(python3 -c "print(min($backoff * 2 ** $attempt, 60))")
  say "attempt $attempt failed with status $status${prev_rank:+ (rank $prev_rank)}; restarting from $(cat "$ckpt_dir/latest" 2>/dev/null || echo 'the start') in ${wait_s}s"
  sleep "$wait_s"
  attempt=$((attempt + 1))
done
python3 - "$log.tmp" "$log" "$status" "$attempt" <<'PY'
import json, sys
tmp, path, status, attempts = sys.argv[1:]
restarts = [json.loads(l) for l in open(tmp) if l.strip()]
json.dump({"final_exit_status": int(status), "restarts": restarts}, open(path, "w"), indent=2)
PY
rm -f "$log.tmp"
exit "$status"
