#!/usr/bin/env bash
# Resilient launcher: runs a training command (mpirun ... ddp-train ... or srun ...) and, when it
# fails, restarts it from the newest valid checkpoint (the command gets `--resume auto` on every
# restart), up to --max-restarts times with an exponential backoff (doubling with each failure in a
# row that made no progress, i.e. committed no new checkpoint; an attempt that did resets it, so a
# job failing once a day does not wait as long as a crash loop). Each restart is logged as
# one JSON object in --log: attempt, exit status, the verdict and its culprit (below),
# the checkpoint resumed from, and the restart time (relaunch to the first completed resumed step,
# read from the rank-0 step log's wall-clock "time").
#
# Elastic restarts (--min-ranks M): when a node is gone (--capacity-cmd prints fewer ranks than
# run now) or one rank keeps failing (the diagnosis names the same culprit --rank-failures times in
# a row: its slot is dropped), the restart runs on the largest world size W' >= M that the launch allows
# (W' <= capacity, never above the first launch's) and that divides the global batch's
# micro-batches (--global-batch / --micro-batch of the command): grad_accum absorbs the difference,
# so the global batch, learning-rate schedule and sample order continue exactly (and bitwise with
# --deterministic). The launcher rewrites the command's rank count (mpirun -np/-n/--np, srun
# -n/--ntasks); the restart log records the old and new world size and why it changed.
#
# Diagnosis (every failed attempt, status not 0 and not 2): the launcher runs `hang-diagnose --json`
# on that attempt's flight records (RUN_DIR/flight.rank*.json, then kept in RUN_DIR/flight.attemptN/)
# and prints one line on stderr:
#   run-resilient.sh: verdict attempt N: CLASS rank R (host H) group G seq S op OP step K phase P; diagnosed in X.XX s
# CLASS: skipped-collective, mismatch, hang-outside-collective, dead-rank, error-exit, straggler or
# ambiguous; fields it cannot know print as "-"; X.XX: seconds from the first rank's timeout (the
# earliest failure trigger in the records; for a rank that died, the survivors' first record on
# mpirun's signal) to this line. An attempt that left no flight record is
# judged from the command's output (our tools' "[rank R/W] error" line: error-exit; mpirun's "rank R
# ... exited on signal": dead-rank). The restart log gets "verdict": {class, culprit_rank,
# culprit_host, group, seq, op, step, phase, diagnosis_s} and "failed_rank" = the culprit (never the
# rank mpirun saw exit first: in a hang that is a victim). An error every rank exited with (the
# job's, e.g. a NaN loss) has no culprit to exclude.
# Exclusion: a culprit named in --rank-failures K consecutive attempts (default 2) is excluded:
# with --exclude-cmd CMD (under Slurm) the launcher runs `CMD HOST RANK` once, logs "excluding host H
# (rank R named K times in a row)", writes the restart log and exits 75 (the batch script requeues
# the job without the node); otherwise, with --min-ranks, by an elastic restart without its slot.
# Stop conditions (restarts used up, no world size >= --min-ranks left) are printed and logged
# ("stop": {reason}).
#
# Usage: scripts/run-resilient.sh [--max-restarts N] [--backoff SECONDS] [--log FILE]
#                                 [--min-ranks M [--capacity-cmd CMD]] [--rank-failures K]
#                                 [--diagnose-bin DIR] [--exclude-cmd CMD] -- COMMAND...
#   COMMAND must contain --run-dir DIR (the step logs) and may contain --ckpt-dir DIR
#   (default DIR/checkpoints). --capacity-cmd CMD: a shell command printing how many ranks can
#   run now (e.g. live nodes x tasks per node), asked before each restart. --rank-failures K:
#   default 2. --diagnose-bin DIR: where hang-diagnose is (default: the folder of the ddp-train or
#   fsdp-train named in the command). Exit status: 0 when the command finally succeeds, 75 after an
#   exclusion by --exclude-cmd, else the last failure's status
#   (after the restarts ran out, or when no world size >= M fits: then with that reason). A
#   command that exits 2 (usage or input error) is not retried: its message is repeated last.
#   SIGUSR1 to the launcher (a time-limit warning sent to the whole job) is recorded, not fatal:
#   the current attempt runs to its end (the ranks checkpoint and exit on their own SIGUSR1) and
#   is not restarted.
set -uo pipefail

max_restarts=3
backoff=1
log=""
min_ranks="" capacity_cmd="" rank_failures=2 diagnose_bin="" exclude_cmd=""
while (($#)); do
  case "$1" in
    --max-restarts) max_restarts=$2; shift 2 ;;
    --backoff) backoff=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --min-ranks) min_ranks=$2; shift 2 ;;
    --capacity-cmd) capacity_cmd=$2; shift 2 ;;
    --rank-failures) rank_failures=$2; shift 2 ;;
    --diagnose-bin) diagnose_bin=$2; shift 2 ;;
    --exclude-cmd) exclude_cmd=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run-resilient.sh: unknown option '$1' (put the command after --)" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "run-resilient.sh: no command given (usage: run-resilient.sh [options] -- COMMAND...)" >&2; exit 2; }
[[ "$max_restarts" =~ ^[0-9]+$ ]] || { echo "run-resilient.sh: --max-restarts must be a whole number" >&2; exit 2; }
command=("$@")
[[ "$rank_failures" =~ ^[1-9][0-9]*$ ]] || { echo "run-resilient.sh: --rank-failures must be a positive whole number" >&2; exit 2; }
if [ -n "$min_ranks" ]; then
  [[ "$min_ranks" =~ ^[1-9][0-9]*$ ]] || { echo "run-resilient.sh: --min-ranks must be a positive whole number" >&2; exit 2; }
elif [ -n "$capacity_cmd" ]; then
  echo "run-resilient.sh: --capacity-cmd needs --min-ranks M (the smallest world size to restart on)" >&2; exit 2
fi

run_dir="" ckpt_dir=""
for ((i = 0; i < ${#command[@]}; i++)); do
  case "${command[i]}" in
    --run-dir) run_dir=${command[i+1]:-} ;;
    --ckpt-dir) ckpt_dir=${command[i+1]:-} ;;
  esac
  if [ -z "$diagnose_bin" ]; then
    case "${command[i]}" in */ddp-train|*/fsdp-train) diagnose_bin=$(dirname "${command[i]}") ;; esac
  fi
done
if [ -z "$diagnose_bin" ]; then
  for name in ddp-train fsdp-train; do
    for a in "${command[@]}"; do [ "$a" = "$name" ] && p=$(command -v "$name") && diagnose_bin=$(dirname "$p"); done
  done
fi
[ -n "$run_dir" ] || { echo "run-resilient.sh: the command needs --run-dir DIR (where the step logs go)" >&2; exit 2; }
ckpt_dir=${ckpt_dir:-$run_dir/checkpoints}
log=${log:-$run_dir/restarts.json}
mkdir -p "$run_dir"
: >"$log.tmp"
has_resume=0
for a in "${command[@]}"; do [ "$a" = "--resume" ] && has_resume=1; done

# Elastic mode: where the command says its rank count, and the global batch in micro-batches.
np_index="" world="" micro_batches=""
if [ -n "$min_ranks" ]; then
  global_batch="" micro_batch=1
  for ((i = 0; i < ${#command[@]}; i++)); do
    case "${command[i]}" in
      -np|-n|--np|--ntasks) [ -z "$np_index" ] && np_index=$((i + 1)) ;;
      --global-batch) global_batch=${command[i+1]:-} ;;
      --micro-batch) micro_batch=${command[i+1]:-} ;;
    esac
  done
  [ -n "$np_index" ] && world=${command[np_index]:-}
  [[ "$world" =~ ^[0-9]+$ ]] ||
    { echo "run-resilient.sh: --min-ranks needs the rank count in the command as -np N, -n N, --np N or --ntasks N" >&2; exit 2; }
  [[ "$global_batch" =~ ^[0-9]+$ && "$micro_batch" =~ ^[0-9]+$ ]] ||
    { echo "run-resilient.sh: --min-ranks needs --global-batch N (and --micro-batch, default 1) in the command" >&2; exit 2; }
  micro_batches=$((global_batch / micro_batch))
  ((min_ranks <= world)) ||
    { echo "run-resilient.sh: --min-ranks $min_ranks is above the command's $world ranks" >&2; exit 2; }
fi
launch_world=$world
same_rank_failures=0 last_failed_rank=""
# The largest world size in [min_ranks, $1] that divides the global batch's micro-batches; empty if none.
fitting_world() {
  local w
  for ((w = $1; w >= min_ranks; w--)); do ((micro_batches % w == 0)) && { echo "$w"; return; }; done
}

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

# The rank count of command line "$@" (-np/-n/--np/--ntasks N), or nothing.
rank_count() {
  local prev=""
  for a in "$@"; do
    case "$prev" in -np|-n|--np|--ntasks) [[ "$a" =~ ^[0-9]+$ ]] && { echo "$a"; return; } ;; esac
    prev=$a
  done
}

# diagnose ATTEMPT OUTPUT WORLD ENDED: the verdict of a failed attempt (see the header). Prints the verdict
# line on stderr, writes the verdict object to RUN_DIR/attemptN.verdict.json, moves the attempt's
# flight records to RUN_DIR/flight.attemptN/, and sets v_rank (the culprit to count; empty when none),
# v_host and v_class.
diagnose() {
  local answer
  answer=$(python3 - "$diagnose_bin" "$run_dir" "$2" "$3" "$1" "$4" <<'PY'
import glob, json, os, re, subprocess, sys, time
bin_dir, run, out_path, world, attempt, ended = sys.argv[1:]
records = sorted(glob.glob(os.path.join(run, "flight.rank*.json")))
# The first failure trigger (timeout, error, exit) of any record; without one (a rank died and
# mpirun ended the others) the first record written on a signal: when the failure was noticed.
hosts, first, first_signal = {}, None, None
for f in records:
    try:
        r = json.load(open(f))
    except (OSError, ValueError):
        continue
    hosts[r.get("rank")] = r.get("hostname")
    for t in r.get("triggers") or []:
        if not isinstance(t.get("at"), (int, float)):
            continue
        if t.get("reason") in ("timeout", "error", "exit"):
            first = t["at"] if first is None else min(first, t["at"])
        elif t.get("reason") == "signal":
            first_signal = t["at"] if first_signal is None else min(first_signal, t["at"])
if first is None:
    first = first_signal
try:
    output = open(out_path, errors="replace").read()
except OSError:
    output = ""
# mpirun's report of ranks that died: rank -> host.
died = {int(m.group(1)): m.group(2) for m in
        re.finditer(r"rank (\d+) with PID \d+ on node (\S+) exited on signal", output)}
v = {"class": "ambiguous", "culprit_rank": None, "culprit_host": None, "group": None, "seq": None, "op": None,
     "step": None, "phase": None, "diagnosis_s": None, "source": "hang-diagnose", "command_ended_at": float(ended)}
tool = os.path.join(bin_dir, "hang-diagnose") if bin_dir else ""
diagnosis, no_hang = None, False
if records and tool and os.access(tool, os.X_OK):
    cmd = [tool, "--json", run] + (["--world-size", world] if world else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode in (0, 1):
        try:
            diagnosis = json.loads(p.stdout)
        except ValueError:
            diagnosis = None
    if diagnosis is None:
        v["source"] = "hang-diagnose failed: " + (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
elif records:
    v["source"] = "no hang-diagnose (give --diagnose-bin DIR)"
if diagnosis is not None:
    s = diagnosis.get("summary") or {}
    for k in ("class", "culprit_rank", "group", "seq", "op", "step", "phase"):
        v[k] = s.get(k)
    no_hang = v["class"] == "no-hang"
    if no_hang:
        v["class"] = "ambiguous"
    c = diagnosis.get("culprit") or {}
    if "an error of the whole job" in c.get("evidence", ""):
        v["culprit_rank"] = None  # every rank exited with this error: nobody to exclude
# Records that show no failure (no hang, no mismatch, no exit): the one rank the step logs name as a
# straggler, if any. Never after a verdict of the records (an undecidable one stays ambiguous).
if no_hang and tool and os.access(tool, os.X_OK) and \
        glob.glob(os.path.join(run, "steps.rank*.jsonl")):
    p = subprocess.run([tool, "--stragglers", "--json", run], capture_output=True, text=True)
    try:
        named = json.loads(p.stdout)["stragglers"] if p.returncode in (0, 1) else []
    except (ValueError, KeyError):
        named = []
    if len({n["rank"] for n in named}) == 1:
        v.update({"class": "straggler", "culprit_rank": named[0]["rank"], "phase": named[0]["section"],
                  "source": "hang-diagnose --stragglers"})
if diagnosis is None and not records and v["culprit_rank"] is None:
    v["source"] = "the command's output (no flight records)"
    m = re.search(r"^\[rank (\d+)/\d+\] error", output, re.M)
    if m:
        v["class"], v["culprit_rank"] = "error-exit", int(m.group(1))
    elif died:
        v["class"], v["culprit_rank"] = "dead-rank", min(died)
r = v["culprit_rank"]
if r is not None:
    v["culprit_host"] = hosts.get(r) or died.get(r)
if first is not None:
    v["diagnosis_s"] = round(time.time() - first, 3)
field = lambda x: "-" if x is None else str(x)
line = "run-resilient.sh: verdict attempt %s: %s rank %s (host %s) group %s seq %s op %s step %s phase %s; diagnosed in %s" % (
    attempt, v["class"], field(r), field(v["culprit_host"]), field(v["group"]), field(v["seq"]), field(v["op"]),
    field(v["step"]), field(v["phase"]), "-" if v["diagnosis_s"] is None else "%.2f s" % v["diagnosis_s"])
print(line, file=sys.stderr, flush=True)
json.dump(v, open(os.path.join(run, "attempt%s.verdict.json" % attempt), "w"))
print(field(r), field(v["culprit_host"]), v["class"])
PY
)
  read -r v_rank v_host v_class <<<"$answer"
  [ "$v_rank" = "-" ] && v_rank=""
  if compgen -G "$run_dir/flight.rank*.json" >/dev/null; then
    mkdir -p "$run_dir/flight.attempt$1" && mv "$run_dir"/flight.rank*.json "$run_dir/flight.attempt$1/"
  fi
}

# The restart log's stop condition (why no restart follows), printed too.
stop_reason=""
stop() { stop_reason=$1; say "$1"; }

# SIGUSR1 (a batch job's time-limit warning, e.g. `scancel --signal=USR1 --full`) reaches the ranks
# too: they checkpoint and exit. The launcher must outlive it and must not restart the job that
# is being stopped: the trap only records the request (a trap, unlike an ignored signal, is not
# inherited by the command), and the loop ends after the current attempt with its status.
stop_requested=0
trap 'stop_requested=1' USR1

# Records of an earlier job in this run directory would be read with this one's: kept apart.
if compgen -G "$run_dir/flight.rank*.json" >/dev/null; then
  mkdir -p "$run_dir/flight.before" && mv "$run_dir"/flight.rank*.json "$run_dir/flight.before/"
fi
attempt=0
status=0
v_rank="" v_host="" v_class=""
no_progress=0  # failures in a row that committed no new checkpoint: the backoff's exponent
while :; do
  cmd=("${command[@]}")
  [ -n "$np_index" ] && cmd[np_index]=$world
  ((attempt > 0 && !has_resume)) && cmd+=(--resume auto)
  resumed_from=$(cat "$ckpt_dir/latest" 2>/dev/null || true)
  launched=$(now)
  out="$run_dir/attempt$attempt.log"
  say "attempt $attempt: ${cmd[*]}"
  "${cmd[@]}" > >(tee "$out") 2>&1
  status=$?
  ended=$(now)
  sleep 0.2  # let tee finish
  if ((attempt > 0)); then
    first=$(first_step_after "$launched")
    python3 - "$log.tmp" "$attempt" "$prev_status" "$prev_rank" "$resumed_from" "$launched" "${first:-}" \
      "$prev_world" "$world" "$world_reason" "$run_dir/attempt$((attempt - 1)).verdict.json" <<'PY'
import json, sys
path, attempt, status, rank, ckpt, launched, first, old_w, new_w, reason, verdict = sys.argv[1:]
try:
    verdict = {k: v for k, v in json.load(open(verdict)).items() if k not in ("source", "command_ended_at")}
except (OSError, ValueError):
    verdict = None
rec = {"attempt": int(attempt), "previous_exit_status": int(status),
       "failed_rank": int(rank) if rank else None, "verdict": verdict,
       "resumed_from": ckpt or None, "relaunch_time": float(launched),
       "first_resumed_step_time": float(first) if first else None,
       "restart_s": (float(first) - float(launched)) if first else None}
if new_w:
    rec.update({"previous_world_size": int(old_w), "world_size": int(new_w), "world_size_reason": reason or None})
open(path, "a").write(json.dumps(rec) + "\n")
PY
  fi
  if ((status == 0)); then
    say "attempt $attempt succeeded"
    break
  fi
  if ((stop_requested)); then
    say "attempt $attempt ended with status $status after SIGUSR1 (the job is being stopped): not restarted"
    break
  fi
  prev_rank=""
  if ((status != 2)); then
    diagnose "$attempt" "$out" "$(rank_count "${cmd[@]}")" "$ended"
    prev_rank=$v_rank  # the culprit of the diagnosis (none for an error of the whole job)
  fi
  prev_status=$status
  # Exit 2 is a usage or input error (a bad option, a malformed dataset or checkpoint): running the
  # same command again cannot succeed, so it is not retried; the command's own message ends the log.
  if ((status == 2)); then
    say "attempt $attempt failed with status 2 (a usage or input error: not retried)"
    # The command's own message: the last line outside mpirun's banners (blocks between lines of
    # dashes) and CLI hints, not ours.
    last=$(awk '/^--------------------+$/ { banner = !banner; next } !banner && !/^run-resilient.sh:/ && !/^Run with --help/ && !/^\s*$/ { l = $0 } END { print l }' "$out")
    [ -n "$last" ] && echo "$last" >&2
    break
  fi
  # The same culprit named in consecutive attempts (the count starts over when the world changes).
  if [ -n "$prev_rank" ] && [ "$prev_rank" = "$last_failed_rank" ]; then
    same_rank_failures=$((same_rank_failures + 1))
  else
    same_rank_failures=$([ -n "$prev_rank" ] && echo 1 || echo 0) last_failed_rank=$prev_rank
  fi
  if [ -n "$exclude_cmd" ] && [ -n "$prev_rank" ] && ((same_rank_failures >= rank_failures)); then
    if [ -n "$v_host" ] && [ "$v_host" != "-" ]; then
      say "excluding host $v_host (rank $prev_rank named $same_rank_failures times in a row)"
      bash -c "$exclude_cmd \"\$1\" \"\$2\"" exclude "$v_host" "$prev_rank" ||
        say "--exclude-cmd exited $? (host $v_host, rank $prev_rank)"
      stop_reason="excluded host $v_host (rank $prev_rank named $same_rank_failures times in a row): requeued by --exclude-cmd"
      status=75
      break
    fi
    say "rank $prev_rank named $same_rank_failures times in a row, but its host is unknown: not excluded"
  fi
  if ((attempt >= max_restarts)); then
    stop "attempt $attempt failed with status $status; no restarts left (--max-restarts $max_restarts): stopping"
    break
  fi
  if [ "$(cat "$ckpt_dir/latest" 2>/dev/null || true)" != "$resumed_from" ]; then
    no_progress=0  # this attempt committed a checkpoint: not a crash loop
  fi
  wait_s=$(python3 -c "print(min($backoff * 2 ** $no_progress, 60))")
  no_progress=$((no_progress + 1))
  say "attempt $attempt failed with status $status${prev_rank:+ (rank $prev_rank)}; restarting from $(cat "$ckpt_dir/latest" 2>/dev/null || echo 'the start') in ${wait_s}s"
  sleep "$wait_s"
  prev_world=$world world_reason=""
  if [ -n "$min_ranks" ]; then
    # How many ranks can run now: the capacity command's answer (never above the first launch),
    # less the slot of a rank that keeps failing.
    capacity=$launch_world
    if [ -n "$capacity_cmd" ]; then
      answer=$(bash -c "$capacity_cmd" 2>/dev/null | tail -1 | tr -d '[:space:]')
      if [[ "$answer" =~ ^[0-9]+$ ]]; then
        ((answer < capacity)) && capacity=$answer world_reason="capacity $answer ranks (--capacity-cmd)"
      else
        say "--capacity-cmd printed '${answer}', not a number of ranks; keeping $launch_world"
      fi
    fi
    if [ -n "$prev_rank" ] && ((same_rank_failures >= rank_failures && world - 1 < capacity)); then
      capacity=$((world - 1)) world_reason="rank $prev_rank failed $same_rank_failures times in a row"
    fi
    new_world=$(fitting_world "$capacity")
    if [ -z "$new_world" ]; then
      stop "no world size between --min-ranks $min_ranks and $capacity divides the global batch's $micro_batches micro-batches; giving up"
      break
    fi
    if ((new_world != world)); then
      ((new_world > world)) && world_reason="capacity back to $capacity ranks"
      say "world size $world -> $new_world ($world_reason); grad_accum absorbs the difference"
      world=$new_world same_rank_failures=0 last_failed_rank=""
    else
      world_reason=""
    fi
  fi
  attempt=$((attempt + 1))
done
python3 - "$log.tmp" "$log" "$status" "$attempt" "$stop_reason" "$run_dir/attempt$attempt.verdict.json" <<'PY'
import json, sys
tmp, path, status, attempts, stop, verdict = sys.argv[1:]
restarts = [json.loads(l) for l in open(tmp) if l.strip()]
try:
    verdict = ({k: v for k, v in json.load(open(verdict)).items() if k not in ("source", "command_ended_at")}
               if int(status) not in (0, 2) else None)
except (OSError, ValueError):
    verdict = None
json.dump({"final_exit_status": int(status), "restarts": restarts, "final_verdict": verdict,
           "stop": {"reason": stop} if stop else None}, open(path, "w"), indent=2)
PY
rm -f "$log.tmp"
exit "$status"
