#!/usr/bin/env bash
# The whole chain as a user runs it, producing its own release evidence: data-prep, the training
# runs, the scaling report, the deterministic twin, the kill-and-resume proof, then release-gate
# decide and a cost table. As Slurm jobs chained by dependencies (afterok: a stage starts only when
# the ones before it succeeded; --kill-on-invalid-dep=yes: when one fails, the stages after it are
# cancelled, not left pending), or the same stages one after the other here with --local.
#
#   scripts/slurm/pipeline.sh --input docs.jsonl --cutoff 2019-01-01T00:00:00Z --name exp1 [options]
#   scripts/slurm/pipeline.sh --local --input data/fortunes.jsonl --cutoff 2019-01-01T00:00:00Z --name try
#
# Stages (each also runnable alone: --stage NAME with the same options), all under run/<name>:
#   prep      data-prep INPUT -> data.h5; its JSON summary is evidence/data-prep.json (no_skipped_data)
#   proof     scripts/kill-resume-proof.sh --report evidence/kill-resume.json (kill_resume; a small
#             deterministic job killed and resumed, independent of the dataset)
#   baseline  a short W=1 run (--base-steps) in baseline/: the scaling report's E(W) reference
#   twin      the same short run on --np ranks in twin/ (--deterministic: it must be BITWISE the baseline)
#   equiv     equiv-check --json evidence/equivalence.json twin/params.h5 baseline/params.h5
#             (deterministic_twin)
#   train     the main run on --np ranks (--check-replicas: replica_checks in summary.json); Slurm:
#             scripts/slurm/train.sbatch (requeue, SIGUSR1 120 s before the time limit, checkpoint,
#             requeue, resume); --local: ddp-train under run-resilient
#   scale<W>  with --scale-points: the same short run on W ranks in scale-w<W>/, a further point of
#             the scaling report (one per W in the list other than 1 and --np)
#   report    scale-bench report baseline/, scale-w*/ and the main run -> evidence/scaling (efficiency_report);
#             a point with more ranks than its host's CPUs is marked oversubscribed there
#   decide    release-gate: registers the bigram baseline on first use, then decides the newest
#             checkpoint against last-known-good (or the bigram when there is none yet); exit 0
#             promote, 1 reject (the Slurm job shows FAILED: read the record, docs/RUNBOOK.md)
#   costs     run/<name>/costs.json and a table: bytes stored (dataset, checkpoints, records),
#             preprocessing seconds, compute core-seconds per stage, queue wait per job (from Slurm:
#             sacct, or scontrol show job without accounting). Runs after every other job ends,
#             whatever their outcome.
#
# Options: --input FILE (JSONL for data-prep), --cutoff RFC3339, --name NAME (run/<name>),
#   --np N (ranks of the main run and the twin, default 2), --steps S (default 200),
#   --base-steps B (the baseline's and the twin's steps, default 40 or S if smaller),
#   --scale-points "4,8" (more world sizes for the scaling report; under Slurm a W the cluster
#   cannot hold is left out, said so),
#   --seq-len L (default 256), --model "..." (model and batch options, default "--layers 4
#   --d-model 256 --heads 4 --global-batch 16 --micro-batch 8 --eval-samples 128"),
#   --device cpu|cuda (default cpu), --check-replicas N (default 50), --registry DIR (default
#   run/registry), --policy FILE (default scripts/release-policy.json), --train-args "..." (extra
#   trainer options), --proof-args "..." (kill-resume-proof.sh's options, e.g. "--steps 12 --kills 1"),
#   --no-proof (skip the proof), --local, --stage NAME, --bin DIR (default
#   build/bin), --root DIR (where run/ goes, default the clone).
# Slurm only: --sbatch "..." (options for every job, e.g. "--partition=short --account=me"),
#   --train-sbatch "..." (for the three training jobs only, e.g. "--time=12:00:00
#   --gpus-per-node=4 --ntasks-per-node=4"), --launcher srun|mpirun (train.sbatch's LAUNCHER).
#   Before submitting, every job shape is checked with `sbatch --test-only`; after submitting,
#   a job pending for a reason that never clears (PartitionConfig, ...) cancels the chain, named.
#   Job outputs: run/<name>/slurm-<stage>-<job id>.out (appended across requeues).
# Exit status: 0 the chain ran (--local) or was submitted; 1 a stage failed; 2 a usage error or a
# job that cannot run here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
input="" cutoff="" name="" np=2 steps=200 base_steps="" registry="" policy="$here/scripts/release-policy.json"
train_args="" proof=1 local=0 stage="" bin="$here/build/bin" seq_len=256 device=cpu replicas=50 root="$here"
sbatch_opts="" train_sbatch="" launcher=srun proof_args="" scale_points=""
model_args="--layers 4 --d-model 256 --heads 4 --global-batch 16 --micro-batch 8 --eval-samples 128"
args=("$@")
usage() { echo "pipeline.sh: $*" >&2; exit 2; }
while (($#)); do
  (($# >= 2)) || case "$1" in --no-proof|--local|-h|--help) ;; *) usage "$1 needs a value (see --help)" ;; esac
  case "$1" in
    --input) input=$2; shift 2 ;; --cutoff) cutoff=$2; shift 2 ;; --name) name=$2; shift 2 ;;
    --np) np=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --base-steps) base_steps=$2; shift 2 ;;
    --registry) registry=$2; shift 2 ;; --seq-len) seq_len=$2; shift 2 ;; --model) model_args=$2; shift 2 ;;
    --device) device=$2; shift 2 ;; --check-replicas) replicas=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;; --train-args) train_args=$2; shift 2 ;; --no-proof) proof=0; shift ;;
    --proof-args) proof_args=$2; shift 2 ;; --scale-points) scale_points=$2; shift 2 ;;
    --local) local=1; shift ;; --stage) stage=$2; shift 2 ;; --bin) bin=$2; shift 2 ;; --root) root=$2; shift 2 ;;
    --sbatch) sbatch_opts=$2; shift 2 ;; --train-sbatch) train_sbatch=$2; shift 2 ;; --launcher) launcher=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) usage "unknown option '$1' (see --help)" ;;
  esac
done
[ -n "$input" ] && [ -n "$cutoff" ] && [ -n "$name" ] || usage "--input, --cutoff and --name are required (see --help)"
for v in np steps seq_len replicas; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || usage "--${v//_/-} must be a positive whole number (got '${!v}')"
done
base_steps=${base_steps:-$((steps < 40 ? steps : 40))}
scale=()  # the extra world sizes of the scaling report
for w in ${scale_points//,/ }; do
  [[ "$w" =~ ^[1-9][0-9]*$ ]] || usage "--scale-points takes world sizes like 4,8 (got '$w')"
  if ((w != 1 && w != np)) && [[ " ${scale[*]} " != *" $w "* ]]; then scale+=("$w"); fi
done
[[ "$base_steps" =~ ^[1-9][0-9]*$ ]] || usage "--base-steps must be a positive whole number"
case "$device" in cpu|cuda) ;; *) usage "--device must be cpu or cuda" ;; esac
case "$launcher" in srun|mpirun) ;; *) usage "--launcher must be srun or mpirun" ;; esac
case "$root" in /*) ;; *) root="$(pwd)/$root" ;; esac
case "$input" in /*) ;; *) input="$(pwd)/$input" ;; esac
run="$root/run/$name"
registry=${registry:-$root/run/registry}
data="$run/data.h5"
say() { echo "pipeline.sh [$name]: $*"; }
# Options every training run shares (the scaling report and the twin compare like with like).
read -r -a model <<<"$model_args"
read -r -a extra <<<"$train_args"
# One learning-rate schedule for all of them (the decay's length defaults to --steps, and the
# scaling report refuses runs whose optimizers differ): the main run's, unless --train-args sets it.
schedule="--decay-steps $steps"
[[ " $model_args $train_args " == *" --decay-steps "* ]] && schedule=""
read -r -a sched <<<"$schedule"
common_train=(--data "$data" --cutoff "$cutoff" --seq-len "$seq_len" "${model[@]}" --device "$device"
              --deterministic --check-replicas "$replicas" "${sched[@]}" "${extra[@]}")

# The stage graph, declared once: one line per stage, "NAME KIND RANKS RUN_DIR STEPS NEEDS".
# KIND train: a training run (--local: ddp-train under run-resilient; Slurm: train.sbatch);
# KIND step: a command of run_stage. NEEDS: the stages it waits for (afterok), comma-separated,
# "-" none; a need that is not in the graph (proof with --no-proof) is left out. The order is one
# that runs every stage after its needs (--local runs it as it is).
graph() {
  echo "prep step 1 - - -"
  if ((proof)); then echo "proof step 2 - - -"; fi
  echo "baseline train 1 $run/baseline $base_steps prep"
  echo "twin train $np $run/twin $base_steps prep"
  local w points=baseline,train
  for w in "${scale[@]}"; do
    echo "scale$w train $w $run/scale-w$w $base_steps prep"
    points+=",scale$w"
  done
  echo "equiv step 1 - - baseline,twin"
  echo "train train $np $run $steps prep"
  echo "report step 1 - - $points"
  echo "decide step 1 - - prep,equiv,report,proof"
}
stage_line() {  # stage_line NAME: its line of the graph ("costs" runs after all of them)
  if [ "$1" = costs ]; then echo "costs step 1 - - -"; return; fi
  graph | awk -v s="$1" '$1 == s' | grep . || usage "unknown stage '$1' ($(graph | awk '{print $1}' | tr '\n' ' ')costs)"
}

# Training locally: ddp-train under the resilient launcher (what train.sbatch does in a job).
local_train() {  # local_train RUN_DIR RANKS STEPS
  "$bin/run-resilient" --max-restarts 3 --backoff 2 --log "$1/restarts.json" -- \
    mpirun -np "$2" "$bin/ddp-train" "${common_train[@]}" --steps "$3" --ckpt-every 50 --keep 2 \
    --resume auto --run-dir "$1"
}

run_stage() {
  case "$1" in
    prep)
      mkdir -p "$run/evidence"
      "$bin/data-prep" "$input" -o "$data" >"$run/evidence/data-prep.json"
      say "data-prep: $(jq -r '"\(.documents) documents, \(.rejects.count) rejected"' "$run/evidence/data-prep.json")" ;;
    proof)
      mkdir -p "$run/evidence"
      local -a pa
      read -r -a pa <<<"$proof_args"
      "$bin/kill-resume-proof" --bin "$bin" "${pa[@]}" --report "$run/evidence/kill-resume.json" ;;
    equiv)
      mkdir -p "$run/evidence"
      "$bin/equiv-check" --json "$run/evidence/equivalence.json" "$run/twin/params.h5" "$run/baseline/params.h5" ;;
    report)
      local -a points=("$run/baseline")
      for w in "${scale[@]}"; do if [ -f "$run/scale-w$w/summary.json" ]; then points+=("$run/scale-w$w"); fi; done
      "$bin/scale-bench" report "${points[@]}" "$run" --out "$run/evidence/scaling" ;;
    decide)
      if [ ! -f "$registry/baselines/bigram.json" ]; then
        "$bin/release-gate" baseline bigram --registry "$registry" --data "$data" --cutoff "$cutoff" --order 2 --seq-len "$seq_len"
      fi
      local base=bigram
      [ -f "$registry/last-known-good" ] && base=last-known-good
      # The cost table of every stage so far goes into the release record (decide reads
      # RUN/costs.json); the costs stage rewrites it with the last stages once the chain is done.
      "$bin/release-gate" costs "$run" >/dev/null || say "release-gate costs failed: the record will say costs null"
      "$bin/release-gate" decide "$run/checkpoints" --policy "$policy" --registry "$registry" --baseline "$base" \
        --data "$data" --cutoff "$cutoff" --run-dir "$run" ;;
    costs)
      "$bin/release-gate" costs "$run" ;;
    *)
      local name kind ranks dir n _
      read -r name kind ranks dir n _ <<<"$(stage_line "$1")"
      [ "$kind" = train ] || usage "stage '$1' has no command"
      local_train "$dir" "$ranks" "$n" ;;
  esac
}

# One stage, timed: a line in run/<name>/stages.jsonl (the cost table's local figures; under
# Slurm the queue wait and the allocation come from Slurm itself).
timed_stage() {  # timed_stage STAGE RANKS
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  # In the background: a function called as `f || ...` runs with errexit off, so a failing command
  # inside would not end the stage; an asynchronous command keeps it.
  run_stage "$1" &
  wait $! || rc=$?
  t1=$(date +%s.%N)
  mkdir -p "$run"
  jq -nc --arg s "$1" --argjson r "$2" --argjson a "$t0" --argjson b "$t1" --argjson rc "$rc" --arg job "${SLURM_JOB_ID:-}" \
    '{stage: $s, ranks: $r, start: $a, end: $b, wall_s: ($b - $a), exit_status: $rc,
      job_id: (if $job == "" then null else $job end)}' >>"$run/stages.jsonl"
  return "$rc"
}
ranks_of() { stage_line "$1" | awk '{print $3}'; }

if [ -n "$stage" ]; then
  stage_line "$stage" >/dev/null  # an unknown stage: a usage error here, before anything runs
  timed_stage "$stage" "$(ranks_of "$stage")"
  exit
fi
mapfile -t stages < <(graph | awk '{print $1}')
mkdir -p "$run"
: >"$run/stages.jsonl"
if [ "$local" -eq 1 ]; then
  rc=0
  for s in "${stages[@]}"; do
    say "stage $s"
    timed_stage "$s" "$(ranks_of "$s")" || { rc=$?; say "stage $s failed (exit $rc)"; break; }
  done
  timed_stage costs 1 || true
  exit "$rc"
fi

command -v sbatch >/dev/null || usage "sbatch not found: run on a Slurm login node, or use --local"
read -r -a user_sbatch <<<"$sbatch_opts"
read -r -a user_train_sbatch <<<"$train_sbatch"
self="$here/scripts/slurm/pipeline.sh"
common_sbatch=(--parsable --open-mode=append --kill-on-invalid-dep=yes "${user_sbatch[@]}")
stage_job() { echo --job-name="$name-$1" --output="$run/slurm-$1-%j.out" --ntasks="$(ranks_of "$1")"; }
# The training jobs: train.sbatch with the pipeline's settings in its environment.
train_env() {  # train_env RUN_DIR STEPS
  echo "ALL,SHARDTRAIN_HOME=$here,SHARDTRAIN_BIN=$bin,RUN_DIR=$1,DATA=$data,STEPS=$2,SEQ_LEN=$seq_len,DEVICE=$device,LAUNCHER=$launcher,DETERMINISTIC=1"
}
train_sbatch_args() {  # train_sbatch_args STAGE RANKS RUN_DIR STEPS: printed one per line
  printf '%s\n' --job-name="$name-$1" --output="$run/slurm-$1-%j.out" --ntasks="$2" \
    --export="$(train_env "$3" "$4")" "${user_sbatch[@]}" "${user_train_sbatch[@]}"
}
# MODEL and TRAIN_ARGS hold spaces and commas (which --export would split): exported here instead.
export MODEL="$model_args" TRAIN_ARGS="--cutoff $cutoff --check-replicas $replicas $schedule $train_args"

# Every job shape, checked before anything is submitted: a request this cluster can never
# satisfy (more tasks than a node or partition holds, an unknown partition or account) fails here.
check_shape() {  # check_shape WHAT sbatch-options...
  local what=$1 out; shift
  out=$(sbatch --test-only "$@" --wrap true 2>&1) ||
    usage "the $what job cannot run on this cluster: sbatch --test-only $* says: $(echo "$out" | tail -1) (change --np, --sbatch or --train-sbatch)"
}
check_shape "1-task" --ntasks=1 "${user_sbatch[@]}"
((proof)) && check_shape "proof (2-task)" --ntasks=2 "${user_sbatch[@]}"
check_shape "training ($np ranks)" --ntasks="$np" "${user_sbatch[@]}" "${user_train_sbatch[@]}"
fitting=()
for w in "${scale[@]}"; do
  if sbatch --test-only --ntasks="$w" "${user_sbatch[@]}" "${user_train_sbatch[@]}" --wrap true >/dev/null 2>&1; then
    fitting+=("$w")
  else
    say "W=$w does not fit this cluster (sbatch --test-only --ntasks=$w): left out of the scaling report"
  fi
done
scale=("${fitting[@]}")
kept=()
for s in "${stages[@]}"; do
  if [[ "$s" != scale* || " ${scale[*]} " == *" ${s#scale} "* ]]; then kept+=("$s"); fi
done
stages=("${kept[@]}")

submit_stage() {  # submit_stage DEPENDENCY STAGE: prints the job id
  local dep=$1 st=$2
  # shellcheck disable=SC2046 # stage_job's words are single options without spaces
  sbatch "${common_sbatch[@]}" $(stage_job "$st") ${dep:+--dependency=afterok:$dep} \
    --wrap "$self ${args[*]@Q} --stage $st"
}
submit_train() {  # submit_train DEPENDENCY STAGE RANKS RUN_DIR STEPS: prints the job id
  local dep=$1; shift
  local -a a
  mapfile -t a < <(train_sbatch_args "$@")
  sbatch "${common_sbatch[@]}" "${a[@]}" ${dep:+--dependency=afterok:$dep} "$here/scripts/slurm/train.sbatch"
}
declare -A id=()
while read -r st kind ranks dir n needs; do
  [[ " ${stages[*]} " == *" $st "* ]] || continue  # a scale point this cluster cannot hold
  deps=""
  for need in ${needs//,/ }; do
    if [ -n "${id[$need]:-}" ]; then deps+="${deps:+:}${id[$need]}"; fi
  done
  if [ "$kind" = train ]; then
    id[$st]=$(submit_train "$deps" "$st" "$ranks" "$dir" "$n")
  else
    id[$st]=$(submit_stage "$deps" "$st")
  fi
done < <(graph)
all=""
for s in "${stages[@]}"; do all+="${all:+:}${id[$s]}"; echo "$s ${id[$s]}"; done >"$run/jobs.txt"
# The cost table runs after all of them, whatever their outcome (afterany), and reads Slurm's
# record of each job listed in jobs.txt.
# shellcheck disable=SC2046 # stage_job's words are single options without spaces
id[costs]=$(sbatch "${common_sbatch[@]}" $(stage_job costs) --dependency=afterany:"$all" \
  --wrap "$self ${args[*]@Q} --stage costs")
echo "costs ${id[costs]}" >>"$run/jobs.txt"

# A job pending for a reason that does not clear by itself: cancel the chain and say which. (A
# failed upstream job is not one: --kill-on-invalid-dep cancels what depends on it.)
sleep "${PIPELINE_PENDING_CHECK_S:-3}"
never='PartitionConfig|PartitionNodeLimit|PartitionTimeLimit|BadConstraints|InvalidAccount|InvalidQOS|AccountNotAllowed|QOSMax[A-Za-z]*PerJobLimit|AssocMax[A-Za-z]*PerJobLimit'
ids=$(printf '%s,' "${id[@]}")
bad=$(squeue -h -j "${ids%,}" -o '%i %j %r' 2>/dev/null | grep -E " ($never)" || true)
if [ -n "$bad" ]; then
  scancel "${id[@]}" 2>/dev/null || true
  echo "pipeline.sh [$name]: cancelled the chain: these jobs can never start:" >&2
  echo "$bad" | sed 's/^/  job /' >&2
  exit 2
fi
line=""
for s in "${stages[@]}" costs; do line+=" $s ${id[$s]},"; done
say "submitted:${line%,}"
say "job ids: $run/jobs.txt; outputs: $run/slurm-<stage>-<id>.out; the decision: $run/slurm-decide-${id[decide]}.out; costs: $run/costs.json"
