#!/usr/bin/env bash
# The user's chain on a real one-node Slurm cluster (Debian's slurmctld, slurmd and munge, started
# by tests/scripts/slurm_cluster.sh in a temporary folder, loopback only). Jobs are submitted with
# sbatch, awaited with bounded waits, and every job's state, output and files are checked and
# printed. Cases (issue 23):
#   A  the whole chain (pipeline: prep, proof, baseline, twin, scale4, equiv, train, report,
#      decide, costs): every stage COMPLETED, the five release evidence items present and passing
#      in the release record, the candidate PROMOTED (utility positive, regret within the bound,
#      last-known-good moved to it); a planted bad candidate (30 steps instead of 600, its own
#      job) decided after it is REJECTED on its loss with last-known-good named as the release in
#      service and unmoved; costs.json with Slurm's queue waits
#   B  a time limit that expires: SIGUSR1 before the limit -> checkpoint on every rank -> requeue ->
#      resume; the final parameters and checkpoint BITWISE the uninterrupted run's
#   C  scancel, then the same job submitted again (LAUNCHER=mpirun): BITWISE too
#   D  a bad trainer option / an option given twice / no PMIx: the job FAILS with the message in its
#      output file, nothing retried
#   E  a failed stage (prep on a missing input): its downstream jobs CANCELLED, none left pending;
#      the costs job still runs
#   F  a job shape the cluster cannot hold (--np 64): pipeline exits 2 naming sbatch's reason,
#      nothing submitted
#   G  a bare `sbatch train.sbatch` from a folder that is not a clone: the output file is in the
#      submit folder and says what is missing
#   H  exclude-node.sh on a real job: the node lands in the job's ExcNodeList and the job is requeued
# Models are tiny (2 layers, d_model 32, seq_len 32). The node claims 16 CPUs (SLURM_CLUSTER_CPUS)
# so that jobs which mostly sleep (B and C: --inject delay) run beside the chain on two cores.
#
# Usage: slurm_chain.sh BIN_DIR WORK_DIR
# shellcheck disable=SC2015,SC2016  # `A && B || fail`: fails unless both hold; '$1' is the stand-in srun's own
BIN_DIR=$(cd "$1" && pwd)
WORK=$2
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Strict mode, the Open MPI environment, a fresh WORK, fail/pass, checks (its dataset is unused).
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$repo/tests/scripts/common.sh"
WORK=$(cd "$WORK" && pwd)
t_start=$SECONDS

# The cluster lives in a short /tmp path (munge's socket path must stay under 108 bytes).
cluster=$(mktemp -d /tmp/slurm-test.XXXXXX)
cleanup() {
  local rc=$?
  set +e
  if ((rc != 0)); then
    echo "--- squeue / recent controller log (the cluster's logs are kept in $WORK/cluster-logs)" >&2
    squeue 2>/dev/null >&2 || true
    tail -n 30 "$cluster/log/slurmctld.log" >&2 2>/dev/null || true
  fi
  if [ -n "${kicker:-}" ]; then kill "$kicker" 2>/dev/null; fi
  bash "$repo/tests/scripts/slurm_cluster.sh" stop "$cluster" || true
  cp -r "$cluster/log" "$WORK/cluster-logs" 2>/dev/null || true
  rm -rf "$cluster"
  echo "slurm_chain: $((SECONDS - t_start)) s in all"
  exit "$rc"
}
trap cleanup EXIT
env_line=$(SLURM_CLUSTER_CPUS=16 bash "$repo/tests/scripts/slurm_cluster.sh" start "$cluster")
eval "$env_line"
srun --mpi=list 2>&1 | grep -qw pmix || fail "the test cluster's srun has no pmix (srun --mpi=list)"
grep -q '^MpiDefault=none' "$SLURM_CONF" || fail "the test cluster must keep Slurm's default MpiDefault=none"

# ---- helpers --------------------------------------------------------------------------------------
field() { scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
final_state() { case "$1" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) return 0 ;; esac; return 1; }
# wait_jobs SECONDS ID...: until every job is in a final state; fails naming the ones still going.
wait_jobs() {
  local limit=$1 deadline=$((SECONDS + $1)) j left; shift
  while :; do
    left=""
    for j in "$@"; do final_state "$(field "$j" JobState)" || left+=" $j($(field "$j" JobState)/$(field "$j" Reason))"; done
    [ -z "$left" ] && return 0
    ((SECONDS < deadline)) || fail "jobs not finished after ${limit}s:$left"
    sleep 1
  done
}
# show_job ID FILE...: one line per job (id, name, state, exit code, restarts, queue wait) and the
# files it produced (that must exist).
show_job() {
  local j=$1 f; shift
  local sub start queued=-
  sub=$(field "$j" SubmitTime) start=$(field "$j" StartTime)
  case "$(field "$j" JobState)" in COMPLETED|FAILED|RUNNING|TIMEOUT)
    queued="$(($(date -d "$start" +%s) - $(date -d "$sub" +%s)))s" ;; esac
  printf '  job %-4s %-16s %-10s exit %-5s restarts %s  queued %-4s out %s\n' "$j" "$(field "$j" JobName)" \
    "$(field "$j" JobState)" "$(field "$j" ExitCode)" "$(field "$j" Restarts)" "$queued" "$(field "$j" StdOut | sed "s|$WORK/||")"
  for f in "$@"; do
    [ -e "$f" ] || fail "job $j ($(field "$j" JobName)) did not produce $f"
    printf '           produced %s (%s bytes)\n' "${f#"$WORK"/}" "$(du -sb "$f" | cut -f1)"
  done
}
expect_state() {  # expect_state ID STATE...
  local j=$1 s; shift
  s=$(field "$j" JobState)
  for want in "$@"; do [ "$s" = "$want" ] && return 0; done
  cat "$(field "$j" StdOut)" >&2 2>/dev/null || true
  fail "job $j ($(field "$j" JobName)) is $s, expected $*"
}
verdict() {  # verdict A B [equiv-check options]: prints and returns the verdict word
  "$BIN_DIR/equiv-check" "$@" 2>&1 | sed -n 's/^verdict: \([A-Z]*\).*/\1/p' | head -1
}

# A small corpus: four owners' documents over 2001..2021 (a 2019 cutoff holds out the last tenth of
# each), text from a seeded word chain so a model has something to learn.
checks make-chain-corpus "$WORK/docs.jsonl"
"$BIN_DIR/data-prep" "$WORK/docs.jsonl" -o "$WORK/docs.h5" >/dev/null
cutoff=2019-01-01T00:00:00Z
tiny="--layers 2 --d-model 32 --heads 2 --global-batch 8 --micro-batch 2 --eval-samples 16 --peak-gflops 100 --log-every 20"
# Rank 0 sleeps 0.4 s a step (rank 1 waits for it in the gradient sum, yielding its core).
slow="--inject delay:rank=0,ms=400"
export OMPI_MCA_mpi_yield_when_idle=1
# The training jobs' environment (train.sbatch's variables).
tenv() {  # tenv "NAME=VALUE,...": STEPS is 120 unless given
  local steps=STEPS=120
  [[ ",$1," == *,STEPS=* ]] && steps=""
  echo "ALL,SHARDTRAIN_HOME=$repo,SHARDTRAIN_BIN=$BIN_DIR,DATA=$WORK/docs.h5,SEQ_LEN=32${steps:+,$steps},$1"
}
export MODEL="$tiny"

# ---- B: time limit (submitted first: it takes longest, and mostly sleeps) ----------------------------
# Slurm sends the warning at its first time-limit pass (passes are 30 s apart) that finds the job
# within 50 + 30 s of its limit. Submitted with 10 minutes; once the ranks are stepping, the test
# lowers the limit to 1 minute (scontrol update TimeLimit=1), so Slurm's own warning arrives
# mid-run, within 30 s, while 120 steps x 0.4 s are still running; without the requeue the job
# would be killed at the 1-minute limit.
# Two of them: the ranks started by srun --mpi=pmix (tl/) and by mpirun (tl-mpirun/).
submit_limited() {  # submit_limited RUN_DIR LAUNCHER
  TRAIN_ARGS="--cutoff $cutoff $slow" sbatch --parsable -n 2 --time=10 --signal=B:USR1@50 \
    --job-name="timelimit-$2" --output="$WORK/timelimit-$2-%j.out" \
    --export="$(tenv "RUN_DIR=$1,CKPT_EVERY=1000,SAVE_WAIT=40,LAUNCHER=$2")" "$repo/scripts/slurm/train.sbatch"
}
B=$(submit_limited "$WORK/tl" srun)
B2=$(submit_limited "$WORK/tl-mpirun" mpirun)
echo "B: time-limit jobs $B (srun) and $B2 (mpirun) submitted"
# ---- C: scancel + resubmit, with mpirun inside the allocation ---------------------------------------
mkdir -p "$WORK/sc"
C1=$(TRAIN_ARGS="--cutoff $cutoff $slow" sbatch --parsable -n 2 --job-name=cancelled --output="$WORK/cancel-%j.out" \
       --export="$(tenv "RUN_DIR=$WORK/sc,CKPT_EVERY=5,LAUNCHER=mpirun")" "$repo/scripts/slurm/train.sbatch")
echo "C: job $C1 submitted (to be cancelled)"

# Once the time-limit job's ranks are stepping: lower its limit, and start it again as soon as
# Slurm has requeued it (Slurm holds a requeued job for 120 s before it may start again; the test
# starts it at once with StartTime=now, and gives the second run room to finish: TimeLimit=10).
for jd in "$B:$WORK/tl" "$B2:$WORK/tl-mpirun"; do
  j=${jd%%:*} d=${jd#*:}
  for _ in $(seq 1 240); do
    [ -s "$d/steps.rank0.jsonl" ] && [ "$(wc -l <"$d/steps.rank0.jsonl")" -ge 5 ] && break; sleep 0.5
  done
  [ -s "$d/steps.rank0.jsonl" ] || fail "time-limit job $j made no steps in 120 s"
  scontrol update JobId="$j" TimeLimit=1
  echo "B: job $j at step $(wc -l <"$d/steps.rank0.jsonl"): time limit lowered to 1 minute"
done
( kicked=""
  for _ in $(seq 1 200); do
    for j in "$B" "$B2"; do
      [[ " $kicked " == *" $j "* ]] && continue
      if [ "$(field "$j" JobState)" = PENDING ] && [ "$(field "$j" Restarts)" -ge 1 ]; then
        echo "B: job $j requeued (pending: $(field "$j" Reason)): started again without Slurm's 120 s requeue delay"
        # Not at once: slurmd revokes the first run's credential at its end, with one-second
        # resolution, and refuses a new one issued within that second ("Job credential revoked":
        # the job then FAILS with exit 1 and no output). Two seconds later is safe.
        sleep 2
        scontrol update JobId="$j" TimeLimit=10 StartTime=now; kicked+=" $j"
      fi
      final_state "$(field "$j" JobState)" && kicked+=" $j"
    done
    [[ " $kicked " == *" $B "* && " $kicked " == *" $B2 "* ]] && exit 0
    sleep 1
  done ) &
kicker=$!
# C: cancel once a checkpoint is committed (it is submitted again below).
for _ in $(seq 1 120); do [ -s "$WORK/sc/checkpoints/latest" ] && break; sleep 0.5; done
[ -s "$WORK/sc/checkpoints/latest" ] || fail "job $C1 made no checkpoint in 60 s"
scancel "$C1"

# ---- A: the whole chain ---------------------------------------------------------------------------
pipeline=("$BIN_DIR/pipeline" --input "$WORK/docs.jsonl" --cutoff "$cutoff" --root "$WORK" --home "$repo"
          --bin "$BIN_DIR" --registry "$WORK/registry" --np 2 --steps 600 --base-steps 10 --seq-len 32
          --model "$tiny --lr 1e-2" --check-replicas 100 --proof-args "--steps 12 --kills 1 --save-kills 0 --ckpt-every 3"
          --sbatch "--comment=issue23" --scale-points 4)
"${pipeline[@]}" --name chain | tee "$WORK/pipeline-chain.log"
grep -q "submitted: prep" "$WORK/pipeline-chain.log" || fail "pipeline did not submit the chain"
mapfile -t chain < <(awk '{ print $2 }' "$WORK/run/chain/jobs.txt")
# The planted bad candidate: the same model trained 30 steps instead of 600 (a job of its own, as a
# user would submit one), then decided against last-known-good once the chain's decision is in
# (with the chain's evidence: the rubric passes, so only the candidate's quality can reject it).
decide_job=$(awk '$1 == "decide" { print $2 }' "$WORK/run/chain/jobs.txt")
bad_train=$(TRAIN_ARGS="--cutoff $cutoff" sbatch --parsable -n 2 --job-name=bad-train --output="$WORK/bad-train-%j.out" \
              --export="$(tenv "RUN_DIR=$WORK/run/bad,STEPS=30,CKPT_EVERY=30,LAUNCHER=mpirun")" "$repo/scripts/slurm/train.sbatch")
bad_decide=$(sbatch --parsable -n 1 --job-name=bad-decide --output="$WORK/bad-decide-%j.out" --kill-on-invalid-dep=yes \
               --dependency="afterok:$bad_train,afterany:$decide_job" \
               --wrap "'$BIN_DIR/release-gate' decide '$WORK/run/bad/checkpoints' --policy '$repo/scripts/release-policy.json' \
                       --registry '$WORK/registry' --baseline last-known-good --data '$WORK/run/chain/data.h5' \
                       --cutoff $cutoff --run-dir '$WORK/run/chain'")
echo "A: planted bad candidate: training job $bad_train, its decision job $bad_decide (after $decide_job)"

# ---- F: a job shape this cluster cannot hold ---------------------------------------------------------
rc=0; "${pipeline[@]}" --name toobig --np 64 >"$WORK/pipeline-toobig.log" 2>&1 || rc=$?
cat "$WORK/pipeline-toobig.log"
[ "$rc" -eq 2 ] || fail "pipeline --np 64 exited $rc, expected 2"
grep -q "cannot run on this cluster: sbatch --test-only" "$WORK/pipeline-toobig.log" || fail "the refusal does not name sbatch --test-only"
grep -q submitted "$WORK/pipeline-toobig.log" && fail "pipeline said 'submitted' for a job that cannot run"
scontrol -o show job | grep -q "JobName=toobig-" && fail "pipeline --np 64 submitted jobs"
pass "F: --np 64 on a 16-CPU node: refused before submitting (exit 2), nothing queued"

# ---- D: a bad option, an option twice, no PMIx: fail at once, in the output file, not retried --------
D1=$(TRAIN_ARGS="--cutoff $cutoff --no-such-option 3" sbatch --parsable -n 1 --job-name=badopt \
       --output="$WORK/badopt-%j.out" --export="$(tenv "RUN_DIR=$WORK/bad")" "$repo/scripts/slurm/train.sbatch")
D2=$(TRAIN_ARGS="--steps 5" sbatch --parsable -n 1 --job-name=twice \
       --output="$WORK/twice-%j.out" --export="$(tenv "RUN_DIR=$WORK/twice")" "$repo/scripts/slurm/train.sbatch")
mkdir -p "$WORK/nopmix"
printf '#!/bin/sh\n[ "$1" = --mpi=list ] && { echo "MPI plugin types are..."; echo "	none"; echo "	pmi2"; exit 0; }\nexec /usr/bin/srun "$@"\n' >"$WORK/nopmix/srun"
chmod +x "$WORK/nopmix/srun"
D3=$(TRAIN_ARGS="--cutoff $cutoff" PATH="$WORK/nopmix:$PATH" sbatch --parsable -n 1 --job-name=nopmix \
       --output="$WORK/nopmix-%j.out" --export="$(tenv "RUN_DIR=$WORK/nopmix-run")" "$repo/scripts/slurm/train.sbatch")
# ---- G: bare sbatch from a folder that is not a clone -----------------------------------------------
mkdir -p "$WORK/fresh"
G=$(cd "$WORK/fresh" && env -u MODEL sbatch --parsable "$repo/scripts/slurm/train.sbatch")
# ---- E: a failed stage ----------------------------------------------------------------------------
"${pipeline[@]}" --name broken --no-proof --input "$WORK/no-such-input.jsonl" >"$WORK/pipeline-broken.log" 2>&1 ||
  { cat "$WORK/pipeline-broken.log"; fail "pipeline did not submit the chain on a missing input (it fails as a job)"; }
mapfile -t broken < <(awk '{ print $2 }' "$WORK/run/broken/jobs.txt")

wait_jobs 120 "$D1" "$D2" "$D3" "$G"
echo "D: bad option, option twice, no PMIx"
for j in "$D1" "$D2" "$D3"; do show_job "$j" "$(field "$j" StdOut)"; expect_state "$j" FAILED; done
out=$(field "$D1" StdOut)
grep -q -- "--no-such-option" "$out" || fail "the bad option's job output does not name it"
grep -q "status 2 (a usage or input error: not retried)" "$out" || fail "the bad option was not reported as not retried"
[ "$(grep -c '^run-resilient: attempt [0-9]*:' "$out")" -eq 1 ] || fail "the bad option's job ran more than one attempt"
[ "$(field "$D1" Restarts)" = 0 ] && [ "$(field "$D1" ExitCode)" = 2:0 ] || fail "job $D1: restarts $(field "$D1" Restarts), exit $(field "$D1" ExitCode)"
echo "    $(grep -- '--no-such-option' "$out" | tail -1)"
grep -q "TRAIN_ARGS sets --steps, which train.sbatch already sets" "$(field "$D2" StdOut)" || fail "--steps twice: no clear message"
echo "    $(tail -1 "$(field "$D2" StdOut)")"
grep -q "srun has no PMIx (srun --mpi=list: none pmi2).*LAUNCHER=mpirun" "$(field "$D3" StdOut)" || fail "no PMIx: the message does not name srun --mpi=list"
echo "    $(tail -1 "$(field "$D3" StdOut)" | cut -c1-160)..."
pass "D: each failed at once (exit 2:0, no restart) with its message in the job's output file"
echo "G: bare sbatch from $WORK/fresh"
show_job "$G" "$WORK/fresh/slurm-shardtrain-$G.out"
grep -q "run-resilient not found: submit from the clone's top folder" "$WORK/fresh/slurm-shardtrain-$G.out" ||
  fail "the bare job's output does not say what is missing"
pass "G: the output is in the submit folder (slurm-<job name>-<id>.out) and names what is missing"

wait_jobs 90 "${broken[@]}"
echo "E: failed stage (prep on a missing input): jobs ${broken[*]}"
i=0
while read -r st j; do
  show_job "$j"
  case "$st" in
    prep) expect_state "$j" FAILED ;;
    costs) expect_state "$j" COMPLETED ;;
    *) expect_state "$j" CANCELLED ;;
  esac
  i=$((i + 1))
done <"$WORK/run/broken/jobs.txt"
grep -q "no-such-input" "$WORK/run/broken/slurm-prep-${broken[0]}.out" || fail "the failed prep's output does not name its input"
[ -f "$WORK/run/broken/costs.json" ] || fail "the costs job did not write costs.json after a failed chain"
pass "E: prep FAILED; its $((i - 2)) downstream jobs CANCELLED (none pending); costs still ran"

# ---- C: submit the cancelled job again ------------------------------------------------------------
wait_jobs 60 "$C1"
at=$(cat "$WORK/sc/checkpoints/latest")
C2=$(TRAIN_ARGS="--cutoff $cutoff" sbatch --parsable -n 2 --job-name=resubmitted --output="$WORK/cancel-%j.out" \
       --export="$(tenv "RUN_DIR=$WORK/sc,CKPT_EVERY=5,LAUNCHER=mpirun")" "$repo/scripts/slurm/train.sbatch")
# The uninterrupted reference (same problem, no delay), here on the login node with mpirun.
read -r -a tiny_args <<<"$tiny"
mpirun -np 2 "$BIN_DIR/ddp-train" --data "$WORK/docs.h5" --cutoff "$cutoff" --seq-len 32 "${tiny_args[@]}" --steps 120 \
  --ckpt-every 1000 --deterministic --run-dir "$WORK/ref" >"$WORK/ref.log" 2>&1 || { cat "$WORK/ref.log"; fail "reference run failed"; }
wait_jobs 120 "$C2"
echo "C: scancel at $at, resubmitted"
show_job "$C1" "$(field "$C1" StdOut)"
expect_state "$C1" CANCELLED
show_job "$C2" "$(field "$C2" StdOut)" "$WORK/sc/params.h5" "$WORK/sc/restarts-$C2.0.json"
expect_state "$C2" COMPLETED
grep -q "resum" "$(field "$C2" StdOut)" || fail "the resubmitted job did not resume"
v=$(verdict "$WORK/sc/params.h5" "$WORK/ref/params.h5")
echo "    equiv-check sc/params.h5 ref/params.h5: $v"
[ "$v" = BITWISE ] || fail "scancel + resubmit is $v, not BITWISE"
pass "C: scancel at $at + resubmit (mpirun in the allocation): final parameters BITWISE the uninterrupted run's"

wait_jobs 200 "$B" "$B2"
wait "$kicker" || true
for jd in "$B:$WORK/tl:srun" "$B2:$WORK/tl-mpirun:mpirun"; do
  j=${jd%%:*} d=${jd#*:} l=${jd##*:}; d=${d%:*}
  echo "B: time limit, LAUNCHER=$l"
  out=$(field "$j" StdOut)
  show_job "$j" "$out" "$d/params.h5" "$d/restarts-$j.0.json" "$d/restarts-$j.1.json"
  expect_state "$j" COMPLETED
  [ "$(field "$j" Restarts)" -ge 1 ] || fail "job $j was never requeued"
  grep -E "time limit near|committed after|requeueing job|restart count 1|resumed from" "$out" | sed 's/^/    /'
  grep -q "time limit near" "$out" && grep -q "checkpoint step_[0-9]* committed after" "$out" &&
    grep -q "requeueing job $j" "$out" && grep -q "restart count 1" "$out" ||
    fail "job $j's output lacks the signal -> checkpoint -> requeue -> resume lines"
  grep -q "stop signal: saved step" "$out" || fail "the ranks of job $j did not save on the signal"
  last=$(cat "$d/checkpoints/latest")
  [ "$last" = step_00000120 ] || fail "the time-limit job $j ended at $last"
  v=$(verdict "$d/params.h5" "$WORK/ref/params.h5")
  vc=$(verdict "$d/checkpoints/$last/index.h5" "$WORK/ref/checkpoints/$last/index.h5" --group tensors)
  echo "    equiv-check ${d#"$WORK"/}/params.h5 ref/params.h5: $v; final checkpoints' tensors: $vc"
  [ "$v" = BITWISE ] && [ "$vc" = BITWISE ] || fail "time limit + requeue ($l) is $v / $vc, not BITWISE"
done
pass "B: signal before the limit -> checkpoint on both ranks -> requeue -> resume, with srun and with mpirun: BITWISE the uninterrupted run"

# ---- H: exclude-node.sh inside a real job: ExcNodeList gets the node, the job is requeued ------------
node=$(sinfo -h -o %N | head -1)
H=$(sbatch --parsable --requeue -n 1 --job-name=exclude --output="$WORK/exclude-%j.out" \
      --wrap "$repo/scripts/slurm/exclude-node.sh $node 1; sleep 60")
# Requeued, then pending (in between it is COMPLETING while the first run's processes end).
for _ in $(seq 1 60); do [ "$(field "$H" Restarts)" = 1 ] && [ "$(field "$H" JobState)" = PENDING ] && break; sleep 0.5; done
echo "H: exclude-node.sh $node inside job $H"
show_job "$H" "$(field "$H" StdOut)"
[ "$(field "$H" ExcNodeList)" = "$node" ] && [ "$(field "$H" Restarts)" = 1 ] && [ "$(field "$H" JobState)" = PENDING ] ||
  fail "job $H: ExcNodeList '$(field "$H" ExcNodeList)', restarts $(field "$H" Restarts), state $(field "$H" JobState)"
grep -q "excluding $node (rank 1), then requeueing" "$(field "$H" StdOut)" || fail "exclude-node.sh did not say what it did"
scancel "$H"
pass "H: the node is in the job's ExcNodeList, the job requeued (pending; it can never run on a one-node cluster: cancelled)"

# ---- A: the chain ----------------------------------------------------------------------------------
wait_jobs 200 "${chain[@]}" "$bad_train" "$bad_decide"
r="$WORK/run/chain"
echo "A: the whole chain (jobs ${chain[*]})"
while read -r st j; do
  case "$st" in
    prep) files=("$r/data.h5" "$r/evidence/data-prep.json") ;;
    proof) files=("$r/evidence/kill-resume.json") ;;
    baseline) files=("$r/baseline/summary.json" "$r/baseline/params.h5") ;;
    scale4) files=("$r/scale-w4/summary.json") ;;
    twin) files=("$r/twin/summary.json" "$r/twin/params.h5") ;;
    equiv) files=("$r/evidence/equivalence.json") ;;
    train) files=("$r/summary.json" "$r/checkpoints/latest" "$r/restarts-$j.0.json") ;;
    report) files=("$r/evidence/scaling/report.json" "$r/evidence/scaling/report.md") ;;
    decide) files=() ;;
    costs) files=("$r/costs.json") ;;
  esac
  show_job "$j" "$(field "$j" StdOut)" "${files[@]}"
  expect_state "$j" COMPLETED  # decide too: exit 0 is PROMOTE
  [ "$(field "$j" Comment)" = issue23 ] || fail "job $j did not get pipeline --sbatch's --comment"
done <"$r/jobs.txt"
show_job "$bad_train" "$(field "$bad_train" StdOut)" "$WORK/run/bad/checkpoints/latest"
expect_state "$bad_train" COMPLETED
show_job "$bad_decide" "$(field "$bad_decide" StdOut)"
expect_state "$bad_decide" FAILED  # release-gate decide exit 1: REJECT
[ "$(field "$bad_decide" ExitCode)" = 1:0 ] || fail "the bad candidate's decision job exited $(field "$bad_decide" ExitCode), not 1 (reject)"
grep -E "^decision:|in service:" "$(field "$bad_decide" StdOut)" | sed 's/^/    /'
checks chain-release "$r" "$WORK/registry"
sed 's/^/    /' "$(field "${chain[-1]}" StdOut)" | tail -n 16
pass "A: every stage COMPLETED, all five evidence items present and passing, PROMOTE (last-known-good moved); the planted bad candidate REJECTED with last-known-good named and unmoved; costs.json from Slurm's records"
