#!/usr/bin/env bash
# The whole chain as a user runs it: data-prep -> training -> scale-bench report -> release-gate
# decide, as Slurm jobs chained by dependencies (afterok: a stage starts only when the one before it
# succeeded), or the same stages one after the other on this machine with --local.
#
#   scripts/slurm/pipeline.sh --input docs.jsonl --cutoff 2019-01-01T00:00:00Z --name exp1 [options]
#   scripts/slurm/pipeline.sh --local --input data/fortunes.jsonl --cutoff 2019-01-01T00:00:00Z --name try
#
# Stages (each also runnable alone: --stage NAME with the same options):
#   prep     data-prep INPUT -> run/<name>/data.h5; its JSON summary is the no_skipped_data evidence
#   proof    scripts/kill-resume-proof.sh --report: the kill_resume evidence (a small deterministic
#            job killed and resumed; independent of the dataset, so it runs beside training)
#   train    Slurm: scripts/slurm/train.sbatch (--requeue, SIGUSR1 120 s before the time limit,
#            checkpoint and requeue, resume auto); --local: ddp-train under scripts/run-resilient.sh
#   report   scale-bench report of the run -> run/<name>/evidence/scaling (efficiency_report evidence)
#   decide   release-gate: registers the bigram baseline on first use, then decides the newest
#            checkpoint against last-known-good (or the bigram when there is none yet); exit 0
#            promote, 1 reject (the Slurm job shows FAILED: read the record, docs/RUNBOOK.md)
# The chain does not make the deterministic_twin evidence (a second, --deterministic run compared
# with equiv-check --json into run/<name>/evidence/equivalence.json): without it the default
# policy's rubric scores 4/5 = 0.8, just enough.
#
# Options: --input FILE (JSONL for data-prep), --cutoff RFC3339, --name NAME (run/<name>),
#   --np N (ranks, default 2), --steps S (default 200), --seq-len L (default 256), --model "..." (the
#   model and batch options, default the demo's), --registry DIR (default run/registry),
#   --policy FILE (default scripts/release-policy.json), --train-args "..." (extra ddp-train options),
#   --no-proof (skip the proof stage), --local, --stage NAME, --bin DIR (default build/bin).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
input="" cutoff="" name="" np=2 steps=200 registry="$here/run/registry" policy="$here/scripts/release-policy.json"
train_args="" proof=1 local=0 stage="" bin="$here/build/bin" seq_len=256
model_args="--layers 4 --d-model 256 --heads 4 --global-batch 16 --micro-batch 8 --eval-samples 128"
args=("$@")
while (($#)); do
  case "$1" in
    --input) input=$2; shift 2 ;; --cutoff) cutoff=$2; shift 2 ;; --name) name=$2; shift 2 ;;
    --np) np=$2; shift 2 ;; --steps) steps=$2; shift 2 ;; --registry) registry=$2; shift 2 ;;
    --seq-len) seq_len=$2; shift 2 ;; --model) model_args=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;; --train-args) train_args=$2; shift 2 ;; --no-proof) proof=0; shift ;;
    --local) local=1; shift ;; --stage) stage=$2; shift 2 ;; --bin) bin=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pipeline.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$input" ] && [ -n "$cutoff" ] && [ -n "$name" ] ||
  { echo "pipeline.sh: --input, --cutoff and --name are required (see --help)" >&2; exit 2; }
run="$here/run/$name"
data="$run/data.h5"
read -r -a model <<<"--seq-len $seq_len $model_args"
say() { echo "pipeline.sh [$name]: $*"; }

run_stage() {
  case "$1" in
    prep)
      mkdir -p "$run/evidence"
      "$bin/data-prep" "$input" -o "$data" >"$run/evidence/data-prep.json"
      say "data-prep: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['documents'], 'documents,', d['rejects']['count'], 'rejected')" "$run/evidence/data-prep.json")" ;;
    proof)
      mkdir -p "$run/evidence"
      "$here/scripts/kill-resume-proof.sh" --bin "$bin" --report "$run/evidence/kill-resume.json" ;;
    train)
      read -r -a extra <<<"$train_args"
      "$here/scripts/run-resilient.sh" --max-restarts 3 --backoff 2 --log "$run/restarts.json" -- \
        mpirun -np "$np" "$bin/ddp-train" --data "$data" --cutoff "$cutoff" "${model[@]}" --steps "$steps" \
        --ckpt-every 50 --keep 2 --resume auto --check-replicas 50 --run-dir "$run" "${extra[@]}" ;;
    report)
      "$bin/scale-bench" report "$run" --out "$run/evidence/scaling" ;;
    decide)
      if [ ! -f "$registry/baselines/bigram.json" ]; then
        "$bin/release-gate" baseline bigram --registry "$registry" --data "$data" --cutoff "$cutoff" --order 2 --seq-len "$seq_len"
      fi
      local base=bigram
      [ -f "$registry/last-known-good" ] && base=last-known-good
      "$bin/release-gate" decide "$run/checkpoints" --policy "$policy" --registry "$registry" --baseline "$base" \
        --data "$data" --cutoff "$cutoff" --run-dir "$run" ;;
    *) echo "pipeline.sh: unknown stage '$1' (prep, proof, train, report, decide)" >&2; exit 2 ;;
  esac
}

if [ -n "$stage" ]; then run_stage "$stage"; exit; fi
mkdir -p "$run"
if [ "$local" -eq 1 ]; then
  for s in prep $( ((proof)) && echo proof) train report decide; do
    say "stage $s"
    run_stage "$s"
  done
  exit 0
fi

command -v sbatch >/dev/null || { echo "pipeline.sh: sbatch not found: run on a Slurm login node, or use --local" >&2; exit 2; }
self="$here/scripts/slurm/pipeline.sh"
submit() {  # submit DEPENDENCY STAGE [sbatch options...]: prints the job id
  local dep=$1 st=$2; shift 2
  sbatch --parsable --job-name="$name-$st" --output="$run/slurm-$st-%j.out" ${dep:+--dependency=afterok:$dep} "$@" \
    --wrap "$self ${args[*]@Q} --stage $st"
}
prep_id=$(submit "" prep --ntasks=1)
deps=$prep_id
if ((proof)); then deps="$deps:$(submit "" proof --ntasks=2)"; fi
train_id=$(sbatch --parsable --job-name="$name-train" --output="$run/slurm-train-%j.out" --dependency=afterok:$prep_id \
  --export=ALL,RUN_DIR="$run",DATA="$data",TRAIN_ARGS="--cutoff $cutoff --check-replicas 50 $train_args" \
  "$here/scripts/slurm/train.sbatch")
report_id=$(submit "$train_id" report --ntasks=1)
decide_id=$(submit "$report_id:$deps" decide --ntasks=1)
say "submitted: prep $prep_id, train $train_id (requeue + signal before the time limit), report $report_id, decide $decide_id"
say "the decision: $run/slurm-decide-$decide_id.out; the registry: $registry (release-gate history --registry $registry)"
