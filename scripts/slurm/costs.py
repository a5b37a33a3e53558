#!/usr/bin/env python3
"""The cost table of one pipeline run: RUN/costs.json, printed as a table.

Usage: scripts/slurm/costs.py RUN_DIR

Reads
  RUN_DIR/jobs.txt      "STAGE JOB_ID" lines (Slurm mode, written by pipeline.sh at submit)
  RUN_DIR/stages.jsonl  one line per stage run by pipeline.sh --stage or --local (wall seconds, ranks)
and asks Slurm about each job: `sacct` (every run of a requeued job: --duplicates) where the
cluster keeps accounting, otherwise `scontrol show job` (finished jobs stay there for the
cluster's MinJobAge, 300 s by default: the costs job runs right after the last stage).

Figures (docs/RUNBOOK.md, "Costs"):
  storage_bytes     dataset (RUN/data.h5), checkpoints (every checkpoints/ folder in RUN), records
                    (everything else in RUN: step logs, summaries, flight records, evidence, outputs)
  preprocessing_s   the prep stage's wall seconds (data-prep)
  per stage         compute core-seconds = run time x CPUs allocated (Slurm), or wall x ranks
                    (--local); queue wait = start - submit time (Slurm; a requeued job's later runs
                    count their own wait, from the requeue), 0 when not queued; of it, the wait
                    for resources = start - eligible time (after its dependencies were met).
Exit status 0; 2 when RUN_DIR is not a folder.
"""
import datetime
import json
import os
import re
import subprocess
import sys


def du(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def slurm_time(s):
    if not s or s in ("Unknown", "None", "N/A"):
        return None
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S").timestamp()


def duration(s):  # Slurm's [D-]HH:MM:SS
    days = 0
    if "-" in s:
        d, s = s.split("-", 1)
        days = int(d)
    parts = [int(x) for x in s.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return days * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def sacct_runs(ids):
    """Every run of each job from accounting, or None when the cluster keeps none."""
    try:
        out = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "-j", ",".join(ids),
                              "-o", "JobID,State,Submit,Eligible,Start,End,ElapsedRaw,AllocCPUS"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    runs = {}
    for line in out.stdout.splitlines():
        f = line.split("|")
        if len(f) < 8:
            continue
        submit, eligible, start = slurm_time(f[2]), slurm_time(f[3]), slurm_time(f[4])
        runs.setdefault(f[0], []).append({
            "state": f[1].split()[0], "submit": submit, "start": start, "end": slurm_time(f[5]),
            "run_s": float(f[6] or 0), "cpus": int(f[7] or 0),
            "queue_wait_s": (start - submit) if start and submit else None,
            "resource_wait_s": (start - eligible) if start and eligible else None})
    return runs


def scontrol_run(job):
    out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        return None
    kv = dict(re.findall(r"(\w+)=(\S*)", out.stdout))
    submit, start = slurm_time(kv.get("SubmitTime")), slurm_time(kv.get("StartTime"))
    eligible = slurm_time(kv.get("EligibleTime"))
    run_s = duration(kv.get("RunTime", "0:0:0"))
    ran = run_s > 0 or kv.get("JobState") in ("RUNNING", "COMPLETED", "FAILED", "TIMEOUT")
    return {"state": kv.get("JobState"), "submit": submit, "start": start if ran else None,
            "end": slurm_time(kv.get("EndTime")), "run_s": float(run_s), "cpus": int(kv.get("NumCPUs", 0) or 0),
            "restarts": int(kv.get("Restarts", 0) or 0),
            "queue_wait_s": (start - submit) if ran and start and submit else None,
            "resource_wait_s": (start - eligible) if ran and start and eligible else None,
            "reason": kv.get("Reason")}


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("costs.py: usage: costs.py RUN_DIR (a pipeline run folder)", file=sys.stderr)
        return 2
    run = os.path.abspath(sys.argv[1])
    stages_local = []
    if os.path.exists(os.path.join(run, "stages.jsonl")):
        for line in open(os.path.join(run, "stages.jsonl")):
            try:
                stages_local.append(json.loads(line))
            except ValueError:
                pass
    jobs = []
    if os.path.exists(os.path.join(run, "jobs.txt")):
        jobs = [l.split() for l in open(os.path.join(run, "jobs.txt")) if len(l.split()) == 2]
    own = os.environ.get("SLURM_JOB_ID")
    jobs = [(s, j) for s, j in jobs if j != own]  # this job is still running

    rows = []
    source = "local"
    if jobs:
        runs = sacct_runs([j for _, j in jobs])
        source = "sacct" if runs else "scontrol show job"
        for stage, job in jobs:
            if runs is not None and job in runs:
                rs = runs[job]
            else:
                r = scontrol_run(job)
                rs = [r] if r else []
                source = "scontrol show job" if not runs else source
            if not rs:
                rows.append({"stage": stage, "job_id": job, "state": "unknown (no longer in Slurm's memory)"})
                continue
            last = rs[-1]
            row = {"stage": stage, "job_id": job, "state": last["state"], "runs": len(rs),
                   "restarts": last.get("restarts", len(rs) - 1), "cpus": last["cpus"],
                   "compute_core_s": sum(r["run_s"] * r["cpus"] for r in rs),
                   "run_s": sum(r["run_s"] for r in rs),
                   "queue_wait_s": sum(r["queue_wait_s"] for r in rs if r["queue_wait_s"] is not None),
                   "resource_wait_s": sum(r["resource_wait_s"] for r in rs if r["resource_wait_s"] is not None),
                   "started": any(r["start"] for r in rs)}
            if last.get("reason") and last["reason"] != "None":
                row["reason"] = last["reason"]
            rows.append(row)
    else:
        for s in stages_local:
            if s.get("stage") == "costs":
                continue
            rows.append({"stage": s["stage"], "job_id": None, "state": "COMPLETED" if s["exit_status"] == 0 else "FAILED",
                         "cpus": s["ranks"], "run_s": s["wall_s"], "compute_core_s": s["wall_s"] * s["ranks"],
                         "queue_wait_s": 0.0, "resource_wait_s": 0.0, "started": True})

    dataset = os.path.getsize(os.path.join(run, "data.h5")) if os.path.exists(os.path.join(run, "data.h5")) else 0
    ckpt = 0
    for root, dirs, _files in os.walk(run):
        if "checkpoints" in dirs:
            ckpt += du(os.path.join(root, "checkpoints"))
    total = du(run)
    prep = [s["wall_s"] for s in stages_local if s.get("stage") == "prep"]
    costs = {
        "format": "shardtrain-costs", "version": 1, "run": run, "source": source,
        "storage_bytes": {"dataset": dataset, "checkpoints": ckpt, "records": total - dataset - ckpt, "total": total},
        "preprocessing_s": prep[-1] if prep else None,
        "stages": rows,
        "compute_core_s_total": sum(r.get("compute_core_s", 0) for r in rows),
        "queue_wait_s_total": sum(r.get("queue_wait_s", 0) for r in rows),
    }
    tmp = os.path.join(run, "costs.json.tmp")
    with open(tmp, "w") as f:
        json.dump(costs, f, indent=2)
    os.replace(tmp, os.path.join(run, "costs.json"))

    sb = costs["storage_bytes"]
    print(f"costs of {run} (per-stage figures from {source}):")
    print(f"  stored: dataset {sb['dataset']} B, checkpoints {sb['checkpoints']} B, records {sb['records']} B, total {sb['total']} B")
    print(f"  preprocessing: {costs['preprocessing_s']:.2f} s" if prep else "  preprocessing: not run")
    print(f"  {'stage':<9} {'job':>6} {'state':<11} {'cpus':>4} {'runs':>4} {'run s':>8} {'core s':>9} {'queue s':>8} {'of it, for CPUs':>15}")
    for r in rows:
        print(f"  {r['stage']:<9} {str(r.get('job_id') or '-'):>6} {str(r.get('state')):<11} {r.get('cpus', 0):>4} "
              f"{r.get('runs', 1):>4} {r.get('run_s', 0):>8.1f} {r.get('compute_core_s', 0):>9.1f} {r.get('queue_wait_s', 0):>8.1f} {r.get('resource_wait_s', 0):>15.1f}")
    print(f"  total compute {costs['compute_core_s_total']:.1f} core-s, queue wait {costs['queue_wait_s_total']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
