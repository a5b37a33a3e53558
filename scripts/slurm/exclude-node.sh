#!/usr/bin/env bash
# Exclude a failing node from this Slurm job and requeue the job without it.
#
#   scripts/slurm/exclude-node.sh HOST [RANK]
#
# Called once by scripts/run-resilient.sh --exclude-cmd (train.sbatch passes it) when the same rank
# was named the culprit of K failed attempts in a row; RANK is only logged. Inside a job
# (SLURM_JOB_ID set) it adds HOST to the job's excluded nodes and puts the job back in the queue,
# so it restarts from its newest checkpoint on other nodes:
#   scontrol requeuehold JOB            (the job's list of excluded nodes can change only while it
#                                        is pending; held, so it does not start again before that)
#   scontrol update JobId=JOB ExcNodeList=<the job's excluded nodes>,HOST StartTime=now
#                                       (a requeued job otherwise waits Slurm's 120 s before it may
#                                        start again; the failed node is already out of its way)
#   scontrol release JOB
# The requeue ends this job's processes (this script included, once the update is done: it ignores
# SIGTERM while it works). Exit status: 0 done, 2 usage (no HOST, or not inside a job), 1 a scontrol
# command failed (its message printed).
set -euo pipefail
me=exclude-node.sh
[ "${1:-}" = --help ] || [ "${1:-}" = -h ] && { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0; }
host=${1:-}
rank=${2:--}
[ -n "$host" ] || { echo "$me: usage: exclude-node.sh HOST [RANK]" >&2; exit 2; }
[ -n "${SLURM_JOB_ID:-}" ] || { echo "$me: not inside a Slurm job (SLURM_JOB_ID is not set)" >&2; exit 2; }
job=$SLURM_JOB_ID
trap '' TERM  # the requeue signals the job's processes; finish the update first

# The job's excluded nodes now (empty or "(null)" when none).
current=$(scontrol show job "$job" | tr ' ' '\n' | sed -n 's/^ExcNodeList=//p' | head -1)
case ",$current," in ",,"|",(null),") list=$host ;; *",$host,"*) list=$current ;; *) list="$current,$host" ;; esac

echo "$me: job $job: excluding $host (rank $rank), then requeueing (excluded nodes: $list)" >&2
scontrol requeuehold "$job"
scontrol update JobId="$job" ExcNodeList="$list" StartTime=now
scontrol release "$job"
