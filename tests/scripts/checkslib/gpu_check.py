"""gpu-check: its results folder, from a dry run and from an unpacked bundle."""
from .common import command, expect, load


# ---- gpu-check (gpu_check_dry.sh, bundle_rehearsal.sh) ----

STAGE_KEYS = {"stage", "status", "seconds", "limit_s", "exit_code", "log", "result"}


@command(("results", str))
def gpu_check_dry(results):
    """gpu-check --dry-run's results folder: summary.json a dry run of eleven stages, all passed,
    each with its <stage>.json of every key; the [gpu] tests skipped (no device); deterministic 2
    vs 1 rank BITWISE; GPT-2's 6N + 12LTC the trainer's FLOPs per token; the scaling table at 1
    and 2 workers."""
    s = load(f"{results}/summary.json")
    names = [x["stage"] for x in s["stages"]]
    expect(s["dry_run"] and len(names) == 11, f"dry_run {s['dry_run']}, stages {names}: expected a dry run of 11")
    expect(all(x["status"] == "pass" for x in s["stages"]), f"stages {s['stages']}: expected every one pass")
    for n in names:
        keys = set(load(f"{results}/{n}.json"))
        expect(keys >= STAGE_KEYS, f"{n}.json keys {sorted(keys)}: missing {sorted(STAGE_KEYS - keys)}")
    expect(load(f"{results}/gpu_tests.json")["result"]["skipped_no_device"], "the [gpu] tests did not skip (exit 77)")
    v = load(f"{results}/deterministic_bitwise.json")["result"]["verdict"]
    expect(v == "BITWISE", f"deterministic 2 vs 1 rank: {v}, expected BITWISE")
    g = load(f"{results}/gpt2_124m.json")["result"]
    expect(g["flops_per_token_6N_12LTC"] == g["flops_per_token_trainer"],
           f"FLOPs per token: 6N + 12LTC {g['flops_per_token_6N_12LTC']}, the trainer's {g['flops_per_token_trainer']}")
    workers = [r["workers"] for r in load(f"{results}/cpu_scaling.json")["result"]["table"]]
    expect(workers == [1, 2], f"scaling table at workers {workers}, expected [1, 2]")
    print("  stages:", ", ".join(f"{x['stage']} {x['seconds']:.0f}s" for x in s["stages"]))


@command(("results", str), ("bundle", str))
def gpu_check_bundle(results, bundle):
    """gpu-check --dry-run --only env,build,data,gpu_tests from an unpacked bundle: summary.json
    names the bundle, four stages passed; the build stage built nothing and checked every file of
    the manifest, none mismatched."""
    s = load(f"{results}/summary.json")
    status = [x["status"] for x in s["stages"]]
    expect(s["bundle"] == bundle and status == ["pass"] * 4,
           f"bundle {s['bundle']}, statuses {status}; expected {bundle}, 4 pass")
    b = load(f"{results}/build.json")["result"]
    m = load(f"{bundle}/manifest.json")
    expect(b["built"] is False and b["sha256_mismatch"] == [] and b["files"] == len(m["files"]),
           f"build result {b}: expected nothing built, {len(m['files'])} files checked, none mismatched")
    print("  from the bundle:", ", ".join(f"{x['stage']} {x['status']}" for x in s["stages"]), "-", b["files"], "files checked")
