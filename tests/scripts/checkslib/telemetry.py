"""Telemetry: step logs and summaries (contract 7, MFU, stragglers, memory)."""
import re

from .common import command, expect, load, load_lines, read_text


# ---- telemetry (ddp_equivalence.sh, mfu_peak.sh, stragglers.sh, zero_equivalence.sh) ----

STEP_COLUMNS = ["data_s", "fwd_s", "bwd_s", "comm_total_s", "comm_exposed_s", "comm_cpu_s", "opt_s", "ckpt_s", "step_s"]
STEP_FIELDS = ["step", "rank", "tokens", "loss", "lr", "grad_norm", "config_hash", "data_snapshot_id", "code_version",
               "checkpoint_id"] + STEP_COLUMNS


@command(("run", str), ("world", int), ("--steps", int, None))
def telemetry(run, world, steps):
    """Contract 7: every rank's step log has every field on every step 0..steps-1, its own rank,
    no negative time, the communication thread's CPU time within the time in flight (+1 ms) and
    some CPU time in all; the summary has per-rank statistics of every column, the slowest rank,
    bytes, bus bandwidths beside the bare all-reduce, and E(W) = speedup / W."""
    for r in range(world):
        recs = load_lines(f"{run}/steps.rank{r}.jsonl")
        expect([x["step"] for x in recs] == list(range(steps)), f"rank {r}: steps {[x['step'] for x in recs]}")
        for x in recs:
            missing = [f for f in STEP_FIELDS if f not in x]
            expect(not missing, f"rank {r} step {x['step']}: missing {missing}")
            expect(x["rank"] == r and all(x[c] >= 0 for c in STEP_COLUMNS), f"rank {r}: {x}")
            expect(x["comm_cpu_s"] <= x["comm_total_s"] + 1e-3,
                   f"rank {r} step {x['step']}: cpu {x['comm_cpu_s']} > in flight {x['comm_total_s']}")
        expect(sum(x["comm_cpu_s"] for x in recs) > 0, f"rank {r}: no communication CPU time recorded")
    s = load(f"{run}/summary.json")
    for c in STEP_COLUMNS:
        t = s["per_rank_medians"][c]
        expect(len(t["by_rank"]) == world and t["min"] <= t["median"] <= t["max"], f"{c}: {t}")
    comm = s["communication"]
    expect(0 <= s["slowest_rank"] < world and comm["total_bytes"] > 0 and comm["total_cpu_s"] > 0,
           f"slowest rank {s['slowest_rank']}, communication {comm}")
    expect(comm["AllReduce"]["busbw_GBps"] > 0 and comm["bare_allreduce_busbw_GBps"] > 0, f"bus bandwidths {comm}")
    expect(s["speedup"] > 0 and abs(s["scaling_efficiency"] - s["speedup"] / world) < 1e-9,
           f"speedup {s['speedup']}, E {s['scaling_efficiency']}: expected E = speedup / {world}")
    print(f"  W={world}: {world} step logs x {steps} steps with {len(STEP_FIELDS)} fields; "
          f"E({world}) = {s['scaling_efficiency']:.3f}")


@command(("run", str), ("world", int))
def mfu_measured(run, world):
    """A run without --peak-gflops: 0 < mfu <= 1, equal to min(1, achieved / (W x peak)); the peak
    measured with all W ranks at once, on shared cores exactly when W > CPUs; no step line's MFU
    above 100%."""
    s = load(f"{run}/summary.json")
    mp, cpus = s["mfu_peak"], s["host"]["cpus"]
    ratio = s["throughput_tokens_per_s"] * s["flops_per_token"] / (world * s["peak_flops_per_rank"])
    print(f"  W={world} on {cpus} CPUs: mfu {s['mfu']:.4f} (recomputed {min(1.0, ratio):.4f}), "
          f"peak {s['peak_flops_per_rank'] / 1e9:.2f} GFLOP/s per rank; mfu_peak: {mp['basis']}")
    expect(0 < s["mfu"] <= 1, f"mfu {s['mfu']}")
    expect(abs(s["mfu"] - min(1.0, ratio)) <= 1e-9 * max(1.0, ratio), f"mfu {s['mfu']}, recomputed {ratio}")
    expect(mp["source"] == "measured" and mp["ranks_measured_at_once"] == world, f"mfu_peak {mp}")
    expect(f"measured with all {world} ranks at once" in mp["basis"], f"basis: {mp['basis']}")
    expect(mp["max_ranks_per_host"] == world and mp["host_cpus"] == cpus, f"mfu_peak {mp}")
    expect(mp["shared_cores"] == (world > cpus), f"shared_cores {mp['shared_cores']} with {cpus} CPUs")
    expect(("shared cores" in mp["basis"]) == (world > cpus), f"basis: {mp['basis']}")
    expect(mp["peak_exceeded"] == (ratio > 1), f"peak_exceeded {mp['peak_exceeded']}, ratio {ratio}")
    for line in read_text(f"{run}.log").splitlines():
        m = re.search(r"MFU ([\d.]+)%", line)
        expect(not m or float(m.group(1)) <= 100.0, f"a step line above 100%: {line.strip()}")


@command(("run", str))
def mfu_capped(run):
    """A run with a given peak below its achieved rate: mfu exactly 1, the peak marked exceeded."""
    s = load(f"{run}/summary.json")
    mp = s["mfu_peak"]
    print(f"  --peak-gflops 0.001: mfu {s['mfu']}, mfu_peak: {mp['basis']}")
    expect(s["mfu"] == 1.0, f"mfu {s['mfu']}, expected 1.0")
    expect(mp["source"] == "given" and mp["peak_exceeded"] is True and mp["ranks_measured_at_once"] == 0, f"mfu_peak {mp}")
    expect("exceeded" in mp["basis"] and mp["achieved_flops_per_rank"] > s["peak_flops_per_rank"], f"mfu_peak {mp}")


@command(("summary", str), ("world", int), ("rank", int), ("section", str))
def stragglers(summary, world, rank, section):
    """The summary's stragglers name exactly (rank, section), waited_for is rank, the threshold
    0.75 and window 5 as set, one row per rank."""
    s = load(summary)["stragglers"]
    named = sorted({(x["rank"], x["section"]) for x in s["stragglers"]})
    print(f"  summary stragglers: {[(x['rank'], x['section'], x['score'], round(x['value'], 3), round(1e3 * x['lost_s'], 1)) for x in s['stragglers']]}")
    print(f"  not named: {[(x['rank'], x['section'], x['score'], x['why'][:6]) for x in s['not_named']]}; "
          f"waited_for {s['waited_for']}")
    expect(named == [(rank, section)], f"named {named}, expected only ({rank}, {section})")
    expect(s["waited_for"] == rank, f"waited_for {s['waited_for']}")
    expect(s["threshold"] == 0.75 and s["window"] == 5, f"threshold {s['threshold']}, window {s['window']}")
    expect(len(s["ranks"]) == world, f"{len(s['ranks'])} rows for {world} ranks")


@command(("summary", str), ("budget", float))
def peak_within(summary, budget):
    """Every rank's process stayed within budget (--memory-budget is the process's memory): its resident
    peak, and its tracked peak (memory_bytes_by_rank total) below that."""
    ranks = load(summary)["memory_bytes_by_rank"]
    print(f"  W={len(ranks)} measured resident / tracked peak bytes per rank:",
          [(int(r["resident_peak"]), int(r["total"])) for r in ranks], "budget", int(budget))
    for rank, r in enumerate(ranks):
        expect(r["resident_peak"] > 0, f"rank {rank}: no resident peak in the memory report")
        expect(r["resident_peak"] <= budget, f"rank {rank}: resident peak {r['resident_peak']} over the budget {budget}")
        expect(r["total"] <= r["resident_peak"], f"rank {rank}: tracked peak {r['total']} above its resident peak")



@command(("summary", str), ("tolerance", float))
def memory_accounted(summary, tolerance):
    """Every rank's memory report names what its process held: the tracked categories' peak plus the
    baseline before allocation is within tolerance (a fraction) of the rank's resident peak."""
    ranks = load(summary)["memory_bytes_by_rank"]
    for rank, m in enumerate(ranks):
        expect("resident_peak" in m and m["resident_peak"] > 0, f"rank {rank}: no resident_peak in the memory report")
        named = m["total"] + m["process_baseline"]
        gap = (m["resident_peak"] - named) / m["resident_peak"]
        print(f"  rank {rank}: resident peak {m['resident_peak'] / 1e9:.3f} GB, tracked {m['total'] / 1e9:.3f} GB + "
              f"baseline {m['process_baseline'] / 1e9:.3f} GB, unaccounted {m['unaccounted'] / 1e9:+.3f} GB ({100 * gap:+.1f}%)")
        expect(abs(gap) <= tolerance, f"rank {rank}: {100 * gap:+.1f}% of the resident peak unaccounted, beyond {100 * tolerance:.0f}%")


@command(("plan", str), ("layout", str), ("summary", str), ("tolerance", float))
def plan_predicts_resident(plan, layout, summary, tolerance):
    """scale-bench plan --json's resident prediction for LAYOUT is within tolerance (a fraction) of
    every rank's measured resident peak in the run's summary."""
    rows = [r for r in load(plan)["layouts"] if r["layout"] == layout]
    expect(len(rows) == 1, f"the plan has {len(rows)} rows named {layout}")
    predicted = rows[0]["memory_bytes"]["resident"]
    for rank, m in enumerate(load(summary)["memory_bytes_by_rank"]):
        gap = (predicted - m["resident_peak"]) / m["resident_peak"]
        print(f"  rank {rank}: plan predicts {predicted / 1e9:.3f} GB resident for {layout}, measured "
              f"{m['resident_peak'] / 1e9:.3f} GB ({100 * gap:+.1f}%)")
        expect(abs(gap) <= tolerance, f"rank {rank}: the plan is {100 * gap:+.1f}% off the resident peak, beyond {100 * tolerance:.0f}%")
