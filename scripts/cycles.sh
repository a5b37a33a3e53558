#!/usr/bin/env bash
# Continual release cycles under an arrival pattern, here, one cycle after the other. Documents
# arrive in snapshots: snapshot k is the input's documents available by T_k (data-prep
# --available-by). Cycle k, in WORK/cycle-<k>/:
#   prep     data-prep INPUT --available-by T_k -> data.h5 (a new dataset version; the old ones stay)
#   monitor  release-gate monitor: the release in service on the documents that happened after
#            T_(k-1), rolled back when the policy says so (from cycle 2 on); to the previous
#            known-good, or, for the first release, to the policy's rollback.fallback_baseline
#            (e.g. ngram-cycle-1). Skipped while a baseline is in service (the monitor scores
#            releases only)
#   train    ddp-train fine-tuned from last-known-good (cycle 1, or a baseline in service: from
#            scratch, --first-steps) to cutoff C_k = T_k - HOLDOUT seconds
#   decide   release-gate decide on the hold-out after C_k, against last-known-good (a release or
#            a baseline put back by a rollback; before the first promotion: an n-gram baseline of
#            this snapshot, registered as ngram-cycle-<k>)
#   costs    release-gate costs: cycle-<k>/costs.json (bytes, preprocessing, core-seconds per stage,
#            human review from the registry); after the last cycle WORK/costs.json for the whole pattern
# Every decision and move of the in-service pointer is in the registry (release-gate history).
# With --slurm every stage is a Slurm job (sbatch --wait, one after the other; its id in
# cycle-<k>/jobs.txt, its output in cycle-<k>/slurm-<stage>-<id>.out), so the cost tables take
# run time, CPUs and queue wait from Slurm.
#
#   scripts/cycles.sh --input docs.jsonl --snapshots T1,T2,T3,T4 --holdout-s 172800 --work DIR [options]
#
# Options: --registry DIR (default WORK/registry), --policy FILE (default scripts/release-policy.json),
#   --bin DIR (default build/bin), --np N (ranks, default 1), --steps S (training steps per cycle,
#   default 60), --first-steps S (cycle 1's, default --steps), --baseline-order 1|2 (cycle 1's
#   n-gram, default 1), --prep-args "..." (data-prep options, e.g. --vocab), --train-args "..."
#   (ddp-train's model and batch options), --gate-args "..." (decide's and monitor's evaluation options),
#   --baseline-args "..." (cycle 1's baseline options: its --max-samples must be decide's),
#   --slurm (stages as Slurm jobs), --sbatch "..." (options for every job, e.g. --partition=debug).
# Exit status: 0 every cycle ran (a reject or a rollback is an outcome, not a failure); 1 a stage
# failed (named); 2 a usage error.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
input="" snapshots="" holdout="" work="" registry="" policy="$here/scripts/release-policy.json" bin="$here/build/bin"
np=1 steps=60 first_steps="" order=1 prep_args="" train_args="" gate_args="" baseline_args="" slurm=0 sbatch_args=""
usage() { echo "cycles.sh: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --slurm) slurm=1; shift; continue ;;
  esac
  (($# >= 2)) || usage "$1 needs a value (see --help)"
  case "$1" in
    --input) input=$2 ;; --snapshots) snapshots=$2 ;; --holdout-s) holdout=$2 ;; --work) work=$2 ;;
    --registry) registry=$2 ;; --policy) policy=$2 ;; --bin) bin=$2 ;; --np) np=$2 ;; --steps) steps=$2 ;;
    --first-steps) first_steps=$2 ;; --baseline-order) order=$2 ;; --prep-args) prep_args=$2 ;;
    --train-args) train_args=$2 ;; --gate-args) gate_args=$2 ;; --baseline-args) baseline_args=$2 ;;
    --sbatch) sbatch_args=$2 ;;
    *) usage "unknown option '$1' (see --help)" ;;
  esac
  shift 2
done
[ -n "$input" ] && [ -n "$snapshots" ] && [ -n "$holdout" ] && [ -n "$work" ] ||
  usage "--input, --snapshots, --holdout-s and --work are required (see --help)"
first_steps=${first_steps:-$steps}
for o in np:"$np" steps:"$steps" first-steps:"$first_steps" holdout-s:"$holdout"; do
  [[ "${o#*:}" =~ ^[1-9][0-9]*$ ]] || usage "--${o%%:*} must be a positive whole number (got '${o#*:}')"
done
registry=${registry:-$work/registry}
IFS=, read -r -a times <<<"$snapshots"
read -r -a prep_opts <<<"$prep_args"
read -r -a train_opts <<<"$train_args"
read -r -a gate_opts <<<"$gate_args"
read -r -a baseline_opts <<<"$baseline_args"
read -r -a sbatch_opts <<<"$sbatch_args"
((slurm == 0)) || command -v sbatch >/dev/null || usage "--slurm: sbatch not found (run on a Slurm login node)"
rfc() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
# What is in service: none, release (a checkpoint to monitor and fine-tune from) or baseline (a
# rollback put a registered baseline back: docs/FORMATS.md "Release registry").
serving() {
  if [ -f "$registry/last-known-good" ]; then jq -r 'if .baseline then "baseline" else "release" end' "$registry/last-known-good"
  else echo none; fi
}
say() { echo "cycles.sh [cycle $k]: $*"; }

# timed DIR STAGE RANKS command...: runs it (--slurm: as a job, waited for), appends its line to
# DIR/stages.jsonl (the format of the pipeline tool's, which release-gate costs reads), returns its exit status.
timed() {
  local dir=$1 stage=$2 ranks=$3 t0 t1 rc=0 id
  shift 3
  t0=$(date +%s.%N)
  if ((slurm)); then
    id=$(sbatch --parsable --wait --job-name="cycle-$k-$stage" --output="$dir/slurm-$stage-%j.out" --ntasks="$ranks" \
      "${sbatch_opts[@]}" --wrap "$(printf '%q ' "$@")") || rc=$?
    id=${id%%;*}
    [ -z "$id" ] || { echo "$stage $id" >>"$dir/jobs.txt"; cp "$dir/slurm-$stage-$id.out" "$dir/$stage.log"; }
  else
    "$@" >"$dir/$stage.log" 2>&1 || rc=$?
  fi
  t1=$(date +%s.%N)
  jq -nc --arg s "$stage" --argjson r "$ranks" --argjson a "$t0" --argjson b "$t1" --argjson rc "$rc" \
    '{stage: $s, ranks: $r, start: $a, end: $b, wall_s: ($b - $a), exit_status: $rc, job_id: null}' >>"$dir/stages.jsonl"
  return "$rc"
}
# ok_or_fail RC WORST STAGE: an exit status above WORST fails the pattern, naming the stage's log.
ok_or_fail() { (($1 <= $2)) || { say "$3 failed (exit $1): $dir/$3.log"; tail -5 "$dir/$3.log" >&2; exit 1; }; }

mkdir -p "$work"
dirs=()
for i in "${!times[@]}"; do
  k=$((i + 1)) dir="$work/cycle-$k"
  T=$(date -u -d "${times[$i]}" +%s) || usage "--snapshots: '${times[$i]}' is not a time"
  cutoff=$(rfc $((T - holdout)))
  rm -rf "$dir" && mkdir -p "$dir/evidence" && dirs+=("$dir")
  rc=0; timed "$dir" prep 1 "$bin/data-prep" "$input" -o "$dir/data.h5" --available-by "${times[$i]}" "${prep_opts[@]}" \
    --progress-interval 0 || rc=$?
  ok_or_fail $rc 0 prep
  jq . "$dir/prep.log" >"$dir/evidence/data-prep.json"
  say "snapshot as of ${times[$i]}: $(jq -r '"\(.documents) documents (\(.not_yet_available) not yet available)"' "$dir/prep.log")"
  if [ "$(serving)" = baseline ] && ((i > 0)); then
    say "baseline $(jq -r .baseline.name "$registry/last-known-good") in service: nothing to monitor"
  elif [ "$(serving)" = release ] && ((i > 0)); then
    rc=0; timed "$dir" monitor 1 "$bin/release-gate" monitor --registry "$registry" --policy "$policy" --data "$dir/data.h5" \
      --since "${times[$((i - 1))]}" --data-prep "$dir/evidence/data-prep.json" --run-dir "$dir" "${gate_opts[@]}" || rc=$?
    ok_or_fail $rc 1 monitor
    say "$(grep -E '^verdict|rolled back:' "$dir/monitor.log" | tr '\n' ' ')"
  fi
  resume=()
  if [ "$(serving)" = release ]; then
    resume=(--resume "$(jq -r .checkpoint "$registry/last-known-good")" --fine-tune) n=$steps
  else
    n=$first_steps
  fi
  rc=0; timed "$dir" train "$np" mpirun -np "$np" "$bin/ddp-train" --data "$dir/data.h5" --cutoff "$cutoff" --steps "$n" \
    --ckpt-every "$n" --run-dir "$dir" "${resume[@]}" "${train_opts[@]}" || rc=$?
  ok_or_fail $rc 0 train
  base=last-known-good
  if [ "$(serving)" = none ]; then  # nothing in service yet: an n-gram of this snapshot's selection
    base=ngram-cycle-$k
    "$bin/release-gate" baseline "$base" --registry "$registry" \
      --data "$dir/data.h5" --cutoff "$cutoff" --order "$order" --seq-len "$(jq -r .data.seq_len "$dir/summary.json")" \
      "${baseline_opts[@]}" >"$dir/baseline.log" 2>&1 || ok_or_fail 2 0 baseline
  fi
  rc=0; timed "$dir" decide 1 "$bin/release-gate" decide "$dir/checkpoints" --policy "$policy" --registry "$registry" \
    --baseline "$base" --data "$dir/data.h5" --cutoff "$cutoff" --run-dir "$dir" "${gate_opts[@]}" || rc=$?
  ok_or_fail $rc 1 decide
  say "$(grep -E '^decision' "$dir/decide.log") $(grep -E '^  reason' "$dir/decide.log" | head -3 | tr '\n' ' ')"
  "$bin/release-gate" costs "$dir" --registry "$registry" >/dev/null
done
"$bin/release-gate" costs "${dirs[@]}" --registry "$registry" --total "$work/costs.json"
