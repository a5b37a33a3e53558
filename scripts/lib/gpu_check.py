#!/usr/bin/env python3
"""The results of scripts/gpu-check.sh's stages: one named function per stage's closing computation.

Usage: python3 scripts/lib/gpu_check.py NAME ARGS...    (--help lists the names)

A stage runs the tools; its function here reads what they wrote (summaries, step logs, equiv-check
reports, a JUnit file, the bundle's manifest), writes <stage>.result.json, which gpu-check.sh folds
into <stage>.json, and prints it. A stage that judges its figures (bundle, bf16-vs-fp32,
cpu-scaling) exits 1 with one line saying what was wrong after writing them; unreadable input exits
2. record and summary write the stage and part JSON of docs/PERFORMANCE.md "gpu-check".

This runs on the device machine from the bundle (BUNDLE/scripts/lib/), where only Python's standard
library is there.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from subcommands import Registry, expect, load, load_lines, read_text  # noqa: E402

gpu_check = Registry("gpu_check.py", __doc__.split("\n")[0])
command = gpu_check.command


def write(result, out):
    """Writes a stage's result to out (indented JSON) and prints it."""
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


def output_of(*cmd):
    """The stripped standard output of a command (10 s at most), or why it gave none."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as e:  # a missing or hanging tool is recorded, not fatal
        return f"unavailable ({e.__class__.__name__})"


@command(("out", str), ("dry", int), ("bundle", str))
def env(out, dry, bundle):
    """The env stage: the GPUs (nvidia-smi -L), nvcc's version line, whether NCCL's header is
    there, the CPU count, which tools are on PATH, dry run (dry 1) or not, and the bundle ("" for
    none)."""
    nvcc = "/usr/local/cuda/bin/nvcc"
    write({"gpus": output_of("nvidia-smi", "-L") if shutil.which("nvidia-smi") else "no nvidia-smi",
           "nvcc": output_of(nvcc, "--version").splitlines()[-1:] if os.path.exists(nvcc) else "no nvcc",
           "nccl_header": os.path.exists("/usr/local/cuda/include/nccl.h"),
           "cpus": os.cpu_count(),
           "tools": {t: bool(shutil.which(t)) for t in ["cmake", "mpirun", "h5dump", "gnuplot", "nvidia-smi"]},
           "dry_run": dry == 1,
           "bundle": bundle or None}, out)


@command(("configure_log", str), ("out", str))
def build(configure_log, out):
    """The build stage (a CUDA build here): whether CMake's configure log says the CUDA backend and
    the NCCL transport are ON. Written without printing: the log above says it."""
    log = read_text(configure_log)
    with open(out, "w") as f:
        json.dump({"built": True, "cuda_on": "CUDA backend ON" in log, "nccl_on": "NCCL transport ON" in log}, f)


def sha256_of(path):
    """The SHA-256 (hex) of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def mismatched(bundle, files):
    """The paths of the manifest's files that the bundle does not hold as listed: a link with
    another target, a file missing or of another SHA-256."""
    bad = []
    for f in files:
        p = os.path.join(bundle, f["path"])
        if "link" in f:
            ok = os.path.islink(p) and os.readlink(p) == f["link"]
        else:
            ok = os.path.isfile(p) and sha256_of(p) == f["sha256"]
        if not ok:
            bad.append(f["path"])
    return bad


@command(("bundle_dir", str), ("report", str), ("out", str))
def bundle(bundle_dir, report, out):
    """The build stage from the device bundle: every file against manifest.json; the paths compiled
    into shardtrain_tests (its test data, the tools) linked to the bundle's copies where they do
    not exist; the device libraries launch --report found. Fails when a file does not match."""
    m = load(f"{bundle_dir}/manifest.json")
    bad = mismatched(bundle_dir, m["files"])
    linked = []
    for key, sub in (("testdata", "testdata"), ("bin", "bin")):
        want = m["compiled_paths"][key]
        if not os.path.exists(want):
            os.makedirs(os.path.dirname(want), exist_ok=True)
            os.symlink(os.path.join(bundle_dir, sub), want)
            linked.append(want)
    lines = read_text(report).splitlines()
    write({"built": False, "bundle": bundle_dir, "code_version": m["code_version"], "files": len(m["files"]),
           "sha256_mismatch": bad, "device_libraries": [line.strip() for line in lines if ".so." in line],
           "compiled_paths_linked": linked,
           "all_device_libraries_found": any("all " in line and "found" in line for line in lines)}, out)
    expect(not bad, f"{len(bad)} of {len(m['files'])} files differ from manifest.json: {', '.join(bad)}")


@command(("fortunes", str), ("markov", str), ("out", str))
def data(fortunes, markov, out):
    """The data stage: the fortunes dataset (None where missing) and the Markov set. Written
    without printing."""
    with open(out, "w") as f:
        json.dump({"fortunes": fortunes if os.path.exists(fortunes) else None, "markov": markov}, f)


@command(("junit", str), ("rc", int), ("nccl_rc", int), ("out", str))
def gpu_tests(junit, rc, nccl_rc, out):
    """The gpu_tests stage: the exit codes of shardtrain_tests [gpu] (77: skipped, no device) and
    [nccl], and each case of the [gpu] run's JUnit file (where it wrote one) failed or not."""
    r = {"exit_code": rc, "nccl_exit_code": nccl_rc, "skipped_no_device": rc == 77}
    if os.path.exists(junit) and os.path.getsize(junit) > 0:
        root = ET.parse(junit).getroot()
        r["cases"] = [{"name": c.get("name"), "failed": c.find("failure") is not None or c.find("error") is not None}
                      for c in root.iter("testcase")]
    write(r, out)


@command(("report", str), ("verdict", str))
def expect_verdict(report, verdict):
    """An equiv-check --json report's verdict is verdict."""
    got = load(report)["verdict"]
    expect(got == verdict, f"{report}: verdict {got}, expected {verdict}")


@command(("runs", str), ("out", str))
def resume(runs, out):
    """The resume_cross_device stage: the verdicts of the device->cpu and cpu->device resumes
    (dev_cpu.json, cpu_dev.json) and the final loss of the low-precision checkpoint resumed on
    the cpu."""
    r = {k: load(f"{runs}/{k}.json")["verdict"] for k in ("dev_cpu", "cpu_dev")}
    r["low_precision_checkpoint_resumed_on_cpu"] = load(f"{runs}/low_cpu/summary.json")["final_loss"]
    write(r, out)


@command(("runs", str), ("warmup", int), ("corpus", str), ("out", str))
def bf16_vs_fp32(runs, warmup, corpus, out):
    """The bf16_vs_fp32 stage: the fp32 and low-precision runs' step losses compared step by step
    (relative to fp32) after the warm-up, and their hold-out losses. Fails unless every loss after
    warm-up is within 2% and the hold-out within 1%."""
    hi = [x["loss"] for x in load_lines(f"{runs}/fp32/steps.rank0.jsonl")]
    lo = [x["loss"] for x in load_lines(f"{runs}/low/steps.rank0.jsonl")]
    expect(len(hi) == len(lo) and hi, f"{len(hi)} fp32 steps, {len(lo)} low-precision steps: expected the same, some")
    rel = [abs(b - a) / abs(a) for a, b in zip(hi, lo)]
    after = rel[warmup:] or rel
    sh, sl = load(f"{runs}/fp32/summary.json"), load(f"{runs}/low/summary.json")
    ho_hi, ho_lo = (sh.get("eval") or {}).get("holdout_loss"), (sl.get("eval") or {}).get("holdout_loss")
    ho_rel = abs(ho_lo - ho_hi) / abs(ho_hi) if ho_hi and ho_lo else None
    r = {"corpus": corpus, "steps": len(hi), "warmup": warmup, "precision": [sh["precision"], sl["precision"]],
         "max_rel_loss_diff_after_warmup": max(after), "worst_step": warmup + after.index(max(after)),
         "holdout_loss": [ho_hi, ho_lo], "holdout_rel_diff": ho_rel,
         "loss_within_2pct": max(after) <= 0.02, "holdout_within_1pct": ho_rel is not None and ho_rel <= 0.01,
         "throughput_tokens_per_s": [sh["throughput_tokens_per_s"], sl["throughput_tokens_per_s"]]}
    write(r, out)
    expect(r["loss_within_2pct"] and r["holdout_within_1pct"],
           f"largest loss difference after warm-up {max(after):.4f} (limit 0.02), hold-out {ho_rel} (limit 0.01)")


@command(("summary", str), ("out", str))
def gpt2(summary, out):
    """The gpt2_124m stage: the run's throughput and MFU against the measured and the datasheet
    peak, with FLOPs per token from the formula 6N + 12LTC (independently of the trainer's)."""
    s = load(summary)
    m = s["config"]["model"]
    L, C, T = m["n_layer"], m["d_model"], m["seq_len"]
    N = s["parameters"]
    flops = 6 * N + 12 * L * T * C
    write({"parameters": N, "layers": L, "d_model": C, "seq_len": T, "vocab": m["vocab"], "precision": s["precision"],
           "device": s["device_name"], "tokens_per_s": s["throughput_tokens_per_s"], "median_step_s": s["median_step_s"],
           "flops_per_token_6N_12LTC": flops, "flops_per_token_trainer": s["flops_per_token"],
           "peak_measured_flops": s["peak_flops_per_rank"], "peak_datasheet_flops": s["peak_flops_datasheet_per_rank"],
           "mfu_vs_measured_peak": s["throughput_tokens_per_s"] * flops / s["peak_flops_per_rank"],
           "mfu_vs_datasheet_peak": (s["throughput_tokens_per_s"] * flops / s["peak_flops_datasheet_per_rank"]
                                     if s["peak_flops_datasheet_per_rank"] else None),
           "target_mfu_vs_datasheet": 0.45}, out)


@command(("series", str), ("workers", str), ("rc", int), ("out", str))
def cpu_scaling(series, workers, rc, out):
    """The cpu_scaling stage: scale-bench run's points (workers "1,2,..."): tokens/s, speedup and
    efficiency against the first point, oversubscribed where workers exceed this machine's CPUs.
    Fails unless every point wrote its summary."""
    workers = [int(w) for w in workers.split(",")]
    rows = {}
    for w in workers:
        p = f"{series}/w{w}/summary.json"
        if os.path.exists(p):
            rows[w] = load(p)["throughput_tokens_per_s"]
    base = rows.get(workers[0])
    table = [{"workers": w, "tokens_per_s": t, "speedup": t / base if base else None,
              "efficiency": t / (w / workers[0] * base) if base else None, "oversubscribed": w > os.cpu_count()}
             for w, t in sorted(rows.items())]
    write({"scale_bench_exit": rc, "report_json": f"{series}/report.json" if os.path.exists(f"{series}/report.json") else None,
           "cpus": os.cpu_count(), "table": table}, out)
    expect(len(rows) == len(workers), f"points at workers {sorted(rows)}, expected {workers} (scale-bench exit {rc})")


@command(("results", str), ("name", str), ("status", str), ("seconds", float), ("limit", int), ("rc", int),
         ("reason", str))
def record(results, name, status, seconds, limit, rc, reason):
    """Writes <name>.json: the stage's status, seconds, limit, exit code, reason and log, with its
    <name>.result.json folded in as result (None where it wrote none, {"unreadable": path} where
    it is no JSON)."""
    p = f"{results}/{name}.result.json"
    result = None
    if os.path.exists(p):
        try:
            with open(p) as f:
                result = json.load(f)
        except ValueError:
            result = {"unreadable": p}
    with open(f"{results}/{name}.json", "w") as f:
        json.dump({"stage": name, "status": status, "seconds": seconds, "limit_s": limit, "exit_code": rc,
                   "reason": reason, "log": f"{results}/{name}.log", "result": result}, f, indent=1)


@command(("results", str), ("dry", int), ("bundle", str), ("names", str, "*"))
def summary(results, dry, bundle, names):
    """Writes summary.json: the stages named (those with a <name>.json), in order, with status,
    seconds and reason; dry run (dry 1) or not; the bundle ("" for none). Prints one line a stage."""
    stages = []
    for n in names:
        p = f"{results}/{n}.json"
        if os.path.exists(p):
            d = load(p)
            stages.append({k: d[k] for k in ("stage", "status", "seconds", "reason")})
    with open(f"{results}/summary.json", "w") as f:
        json.dump({"stages": stages, "dry_run": dry == 1, "bundle": bundle or None}, f, indent=1)
    for s in stages:
        print(f"  {s['stage']:<22} {s['status']:<8} {s['seconds']:6.0f} s  {s['reason']}")


if __name__ == "__main__":
    sys.exit(gpu_check.main(sys.argv[1:]))
