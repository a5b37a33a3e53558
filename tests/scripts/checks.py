#!/usr/bin/env python3
"""What the end-to-end tests (tests/scripts/*.sh) compute: one named function per check or fixture.

Usage: python3 checks.py NAME ARGS...        (python3 checks.py --help lists the names;
                                              python3 checks.py NAME --help its arguments)

A check reads what the tools wrote (summaries, step logs, flight records, reports), prints what
it compared on lines starting with two spaces, and exits 0. A failed expectation prints one line,
"checks.py NAME: what was found, what was expected", on stderr and exits 1; input that cannot be
read (a missing file, a file that is no JSON) exits 2 the same way. A fixture writer (make-*) writes
a test's input files; a reader prints one value for the shell.

The checks use only the standard library: the tests run them under Debian's python3 as it is.
"""
import datetime
import glob
import hashlib
import json
import os
import random
import re
import socket
import statistics
import struct
import sys
import xml.etree.ElementTree as ET

# The frame (readers, Failed, the subcommand registry) is the scripts' own: scripts/lib/subcommands.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lib"))
from subcommands import Registry, Unusable, expect, load, load_lines, read_text  # noqa: E402

checks = Registry("checks.py", __doc__.split("\n")[0])
command = checks.command


def save(obj, path):
    """Writes obj to path as JSON."""
    with open(path, "w") as f:
        json.dump(obj, f)


def group_of(dump, name):
    """The flight record's group called name (Failed when the dump has none)."""
    found = [g for g in dump["groups"] if g["name"] == name]
    expect(found, f"rank {dump.get('rank')}'s flight record has no group {name}")
    return found[0]


def flight_records(run, ranks):
    """The flight records flight.rank<R>.json of run, one per rank in ranks."""
    return [load(f"{run}/flight.rank{r}.json") for r in ranks]


# ---- checkpoints (ckpt_resume.sh, ckpt_reshard.sh, equiv_checkpoints.sh) ----

@command(("path", str))
def flip_byte(path):
    """Corrupts a file in place: the byte in its middle XOR 0xFF (a checksum must notice)."""
    try:
        with open(path, "rb") as f:
            data = bytearray(f.read())
    except OSError as e:
        raise Unusable(f"cannot read {path}: {e}")
    expect(data, f"{path} is empty: no byte to flip")
    data[len(data) // 2] ^= 0xFF
    with open(path, "wb") as f:
        f.write(data)


@command(("step_log", str))
def ckpt_stalls(step_log):
    """A run with asynchronous saves logged a training stall (ckpt_s > 0) for at least one step."""
    recs = load_lines(step_log)
    expect(any(r["ckpt_s"] > 0 for r in recs), "no ckpt_s recorded")
    print("  async ckpt_s (stall) per save:", [round(r["ckpt_s"], 4) for r in recs if r["ckpt_s"] > 0])


@command(("report", str), ("--world", int, None), ("--dp", int, None), ("--tp", int, None),
         ("--zero-stage", int, None), ("--grad-accum", int, None), ("--from-world", int, None),
         ("--from-zero-stage", int, None), ("--step", int, None), ("--consumed", int, None))
def resharded_manifest(report, world, dp, tp, zero_stage, grad_accum, from_world, from_zero_stage, step, consumed):
    """ckpt-reshard --inspect --json of a resharded checkpoint: verdict OK; the manifest's layout,
    writers (one file per rank) and grad_accum are the new ones; its history holds one reshard
    entry with the source's layout and writers; sampler, LR schedule and step carried; a data
    snapshot id."""
    r = load(report)
    m = r["manifest"]
    expect(r["verdict"] == "OK", f"verdict {r['verdict']}: {r.get('problem')}")
    layout = {"world_size": world, "dp": dp, "tp": tp, "zero_stage": zero_stage}
    expect(m["layout"] == layout, f"layout {m['layout']}, expected {layout}")
    expect(m["writers"] == world and len(r["files"]) == world and m["grad_accum"] == grad_accum,
           f"writers {m['writers']}, {len(r['files'])} files, grad_accum {m['grad_accum']}; expected {world}, {world}, "
           f"{grad_accum}")
    h = m["history"]
    expect(len(h) == 1 and h[0]["operation"] == "reshard" and h[0]["layout"]["world_size"] == from_world
           and h[0]["layout"]["zero_stage"] == from_zero_stage and h[0]["writers"] == from_world
           and h[0]["source"].endswith(f"step_{step:08d}"),
           f"history {h}, expected one reshard of a W={from_world} ZeRO-{from_zero_stage} step_{step:08d}")
    expect(m["sampler"]["consumed"] == consumed and m["lr_schedule"]["step"] == step and m["step"] == step,
           f"sampler consumed {m['sampler']['consumed']}, LR step {m['lr_schedule']['step']}, step {m['step']}; "
           f"expected {consumed}, {step}, {step}")
    expect(len(m["data"]["snapshot_id"]) > 0, "the manifest has no data snapshot id")
    print("  manifest: layout", m["layout"], "grad_accum", m["grad_accum"], "history", [x["layout"] for x in h])


@command(("report", str), ("verdict", str), ("bad", str, "*"))
def inspect_verdict(report, verdict, bad):
    """ckpt-reshard --inspect --json: the checkpoint's verdict, and exactly the named files not OK."""
    r = load(report)
    found = [f["name"] for f in r["files"] if f["verdict"] != "OK"]
    expect(r["verdict"] == verdict and found == bad, f"verdict {r['verdict']}, bad files {found}; expected {verdict}, {bad}")
    print("  --json: verdict", r["verdict"], "bad files", found)


@command(("report", str), ("--step", int, None), ("--a-suffix", str, None))
def equiv_bitwise(report, step, a_suffix):
    """equiv-check --json of two checkpoints at step: every tensor BITWISE and non-empty, the
    parameters (wte.weight) and both AdamW moments among them, A read from a folder ending in
    a_suffix."""
    r = load(report)
    names = [t["name"] for t in r["tensors"]]
    print(f"  {len(names)} tensors compared, steps {r['step_a']} and {r['step_b']}, A read from {r['checkpoint_a']}")
    expect(r["kind"] == "checkpoint" and r["step_a"] == r["step_b"] == step,
           f"kind {r['kind']}, steps {r['step_a']} and {r['step_b']}; expected checkpoints at step {step}")
    expect(r["checkpoint_a"].endswith(a_suffix), f"A read from {r['checkpoint_a']}, expected .../{a_suffix}")
    expect(any(n.startswith("optim.exp_avg.") for n in names) and any(n.startswith("optim.exp_avg_sq.") for n in names),
           f"no optimizer moments among {names}")
    expect("wte.weight" in names, f"no wte.weight among {names}")
    bad = [t for t in r["tensors"] if not (t["verdict"] == "BITWISE" and t["count"] > 0)]
    expect(not bad, f"not BITWISE (or empty): {bad}")


@command(("report", str))
def equiv_different(report):
    """equiv-check --json of two different steps: DIFFERENT, naming wte.weight and a second moment."""
    r = load(report)
    bad = [t["name"] for t in r["tensors"] if t["verdict"] == "DIFFERENT"]
    print(f"  step 3 vs step 6: {r['verdict']}, {len(bad)} tensors DIFFERENT, e.g. {bad[:3]}")
    expect(r["verdict"] == "DIFFERENT" and "wte.weight" in bad and any(n.startswith("optim.exp_avg_sq.") for n in bad),
           f"verdict {r['verdict']}, DIFFERENT {bad}: expected DIFFERENT naming wte.weight and an optim.exp_avg_sq tensor")


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

# ---- flight records and hang-diagnose (ddp_faults.sh, hang_matrix.sh, tp_equivalence.sh) ----

@command(("run", str), ("group", str), ("behind", int), ("ahead", int))
def seq_behind(run, group, behind, ahead):
    """Both ranks' flight records time out in group, and rank behind last started the sequence
    number one below rank ahead's."""
    started = {}
    for rec in flight_records(run, (ahead, behind)):
        r = rec["rank"]
        expect(rec["timed_out_group"] == group, f"rank {r}: timed_out_group {rec['timed_out_group']}")
        started[r] = group_of(rec, group)["last_started_seq"]
    print(f"  flight records: rank {ahead} last started seq {started[ahead]}, rank {behind} {started[behind]}")
    expect(started[behind] == started[ahead] - 1, f"rank {behind} last started seq {started[behind]}, "
           f"rank {ahead} {started[ahead]}: expected one behind")



@command(("run", str), ("skipper", int), ("step", int))
def ckpt_skip(run, skipper, step):
    """Two ranks, skipper skipped one collective of the "ckpt" group at step (phase ckpt): its
    record shows that one skipped entry, it last started the seq before it while the other rank
    started it; a rank names ckpt as the group that timed out (its trigger in phase ckpt); the dp
    group's entries are in the dump too."""
    dumps = flight_records(run, (0, 1))
    skipped = [e for e in group_of(dumps[skipper], "ckpt")["entries"] if e["state"] == "skipped"]
    expect(len(skipped) == 1, f"rank {skipper} should show one skipped ckpt entry, has {skipped}")
    s = skipped[0]
    expect(s["phase"] == "ckpt" and s["step"] == step, f"skipped entry {s}")
    started = [group_of(x, "ckpt")["last_started_seq"] for x in dumps]
    other = 1 - skipper
    print(f"  ckpt group: rank {skipper} skipped seq {s['seq']} ({s['op']}, step {s['step']}, phase {s['phase']}); "
          f"last started seq rank 0 {started[0]}, rank 1 {started[1]}")
    expect(started[skipper] == s["seq"] - 1 and started[other] >= s["seq"],
           f"rank {skipper} is not the one behind on the ckpt group (last started {started})")
    timed_out = [x["timed_out_group"] for x in dumps]
    print(f"  timed_out_group per rank: {timed_out}")
    expect("ckpt" in timed_out, "no rank names the ckpt group as the one that timed out")
    for x in dumps:
        if x["timed_out_group"] == "ckpt":
            expect(x["trigger"]["phase"] == "ckpt", f"trigger {x['trigger']}")
    expect(group_of(dumps[0], "dp")["entries"], "the dp group's record is not in the dump")


STEP_PHASES = ("data", "forward", "backward", "optimizer", "step-end", "ckpt")


@command(("run", str), ("world", int), ("signal", str))
def signal_records(run, world, signal):
    """Every rank wrote a flight record for the signal (reason signal), at a step and phase of the
    step loop, with phases and groups."""
    for r in range(world):
        d = load(f"{run}/flight.rank{r}.json")
        expect(d["reason"] == "signal" and d["trigger"] == {"signal": signal},
               f"rank {r}: reason {d['reason']}, trigger {d['trigger']}")
        expect(d["now"]["step"] >= 0 and d["now"]["phase"] in STEP_PHASES, f"rank {r}: now {d['now']}")
        expect(d["phases"] and d["groups"], f"rank {r}: the record has no phases or no groups")
        print(f"  rank {r}: {signal} record at step {d['now']['step']} in {d['now']['phase']}, "
              f"{len(d['phases'])} phase transitions")


@command(("diagnosis", str), ("world", int), ("evidence", str))
def error_exit(diagnosis, world, evidence):
    """hang-diagnose --json on the records of an error exit: verdict error-exit, the culprit's
    evidence naming the error, every rank's record there with reason exit."""
    d = load(diagnosis)
    expect(d["verdict"] == "error-exit", f"verdict {d['verdict']}")
    expect(evidence in d["culprit"]["evidence"], f"culprit {d['culprit']}: no '{evidence}'")
    expect(all(x["reason"] == "exit" for x in d["dumps"]) and len(d["dumps"]) == world, f"dumps {d['dumps']}")
    print("  " + d["culprit"]["evidence"])


@command(("diagnosis", str), ("rank", int), ("cause", str), ("evidence", str))
def culprit(diagnosis, rank, cause, evidence):
    """hang-diagnose --json names rank as the culprit for cause, its evidence holding the text."""
    c = load(diagnosis)["culprit"]
    expect(c is not None and c["rank"] == rank and c["cause"] == cause, f"culprit {c}, expected rank {rank} ({cause})")
    expect(evidence in c["evidence"], f"culprit evidence '{c['evidence']}' without '{evidence}'")
    print(f"  hang-diagnose: culprit rank {c['rank']} ({c['cause']}): {c['evidence']}")


@command(("verdict", str), ("host", str))
def culprit_host(verdict, host):
    """The resilient launcher's attempt verdict names host as its culprit's host."""
    v = load(verdict)
    expect(v.get("culprit_host") == host, f"culprit rank {v.get('culprit_rank')} host {v.get('culprit_host')}, expected host {host}")
    print(f"  culprit rank {v.get('culprit_rank')} on host {v['culprit_host']}")


def expected_blocked(dumps, kind, step, phase, culprit_rank):
    """The collective the job is blocked in, from the dumps alone: for a skipped collective the
    entry the culprit recorded as skipped; for a wrong count the culprit's uncompleted entry at
    the injected step and phase; otherwise the one the culprit never submitted in the group a
    healthy rank waited in (its last submitted seq + 1; without its dump, the healthy ranks'
    earliest pending one)."""
    if kind == "skip-collective":
        skipped = [e for g in dumps[culprit_rank]["groups"] for e in g["entries"] if e["state"] == "skipped"]
        expect(len(skipped) == 1, f"the culprit's dump should hold one skipped entry, has {len(skipped)}")
        return skipped[0]
    if kind == "wrong-count":
        short = [e for g in dumps[culprit_rank]["groups"] for e in g["entries"]
                 if e["step"] == step and e["phase"] == phase and e["state"] != "completed"]
        expect(short, "the culprit's dump should hold the short collective, not completed")
        return short[0]
    healthy = [r for r in dumps if r != culprit_rank]
    pending = [e for r in healthy for g in dumps[r]["groups"] for e in g["entries"]
               if e["state"] in ("started", "timed_out", "aborted")]
    expect(pending, "no healthy rank was waiting in a collective")
    first = min(pending, key=lambda e: (e["t_start"] or 0))
    if culprit_rank not in dumps:
        return first
    mine = [g for g in dumps[culprit_rank]["groups"] if g["name"] == first["group"]]
    seq = (mine[0]["last_enqueued_seq"] if mine else 0) + 1

    def entries(rank):
        g = [g for g in dumps[rank]["groups"] if g["name"] == first["group"]]
        return g[0]["entries"] if g else []
    return [e for r in healthy for e in entries(r) if e["seq"] == seq][0]


@command(("run", str), ("diagnosis", str), ("spec", str), ("cause", str), ("culprit", int), ("world", int))
def hang_case(run, diagnosis, spec, cause, culprit, world):
    """One case of the hang matrix: hang-diagnose --json of a job with the --inject spec names the
    culprit rank with the cause (or, for cause "ambiguous", no culprit and every rank a candidate)
    and reports the blocked collective (group, seq, op, step, phase) that expected_blocked finds in
    the dumps; a hung rank's phase and step are the injected ones; a killed rank is the one missing;
    a wrong count is a numel mismatch at that seq with the culprit's count."""
    d = load(diagnosis)
    kind = spec.split(":")[0]
    fields = dict(kv.split("=") for kv in spec.split(":")[1].split(","))
    step = int(fields["step"])
    phase = fields.get("phase", "forward" if kind in ("hang", "kill") else None)
    dumps = {}
    for f in glob.glob(f"{run}/flight.rank*.json"):
        rec = load(f)
        dumps[rec["rank"]] = rec
    want = expected_blocked(dumps, kind, step, phase, culprit)
    print(f"  expected: {want['group']} seq {want['seq']} {want['op']} step {want['step']} phase {want['phase']}")
    c, b = d["culprit"], d["blocked"]
    print(f"  hang-diagnose: verdict {d['verdict']}, culprit {c}, blocked "
          f"{b and (b['group'], b['seq'], b['op'], b['step'], b['phase'], b['joined'], b['not_joined'], b['no_dump'])}")
    if cause == "ambiguous":
        # Two ranks that disagree on a size at their first collective of that kind: no majority and
        # no earlier step to compare with, so no rank can be blamed; both must be named.
        expect(d["verdict"] == "ambiguous" and c is None, f"verdict {d['verdict']}, culprit {c}")
        expect(sorted(d["candidates"]) == list(range(world)), f"candidates {d['candidates']}")
    else:
        expect(c is not None and c["rank"] == culprit, f"culprit {c}, expected rank {culprit}")
        expect(c["cause"] == cause, f"cause {c['cause']}, expected {cause}")
    expect(b is not None, "no blocked collective reported")
    got = (b["group"], b["seq"], b["op"])
    expect(got == (want["group"], want["seq"], want["op"]), f"blocked {got}, expected {(want['group'], want['seq'], want['op'])}")
    expect(b["step"] == want["step"] and b["phase"] == want["phase"], f"blocked step/phase {b['step']}/{b['phase']}")
    if kind in ("skip-collective", "wrong-count"):
        expect(want["step"] == step, f"the injected step {step}, recorded {want['step']}")
    if kind == "hang":
        now = [r for r in d["ranks"] if r["rank"] == culprit][0]["now"]
        expect((now["phase"], now["step"]) == (phase, step), f"hung rank at {now}, injected {phase} step {step}")
    if kind == "kill":
        expect(d["missing_ranks"] == [culprit], f"missing ranks {d['missing_ranks']}")
    if kind == "wrong-count":
        m = [x for x in d["mismatches"] if x["field"] == "numel" and x["seq"] == want["seq"]]
        expect(m, f"no numel mismatch at seq {want['seq']}: {d['mismatches']}")
        expect(m[0]["values"][str(culprit)] == want["numel"], f"mismatch {m[0]}, the culprit's numel {want['numel']}")


# ---- hang-diagnose's command line (hang_diagnose_cli.sh) ----

@command(("path", str), ("rank", int), ("world", int), ("reason", str), ("last_started", int), ("state5", str),
         ("job", str, "?"))
def make_flight_dump(path, rank, world, reason, last_started, state5, job):
    """Writes a synthetic flight record (docs/FORMATS.md "Flight record", format_version 3) of rank
    in a world of world, for job (default job-1): AllReduce seq 1..4 completed in group dp, seq 5
    recorded in state state5 ("none": not submitted), last started seq last_started; a reason
    "timeout" names dp's seq 5 as its trigger."""
    t0 = 1.7e9

    def entry(seq, state):
        started = state not in ("queued", "skipped")
        return {"id": seq, "seq": seq, "op": "AllReduce", "group": "dp", "dtype": "float32", "numel": 1024,
                "bytes": 4096, "root": -1, "step": (seq + 1) // 2, "phase": "backward", "state": state,
                "t_enqueue": t0 + seq, "t_start": t0 + seq if started else None,
                "t_end": t0 + seq + 0.01 if state == "completed" else None}
    entries = [entry(s, "completed") for s in range(1, 5)]
    if state5 != "none":
        entries.append(entry(5, state5))
    group = {"name": "dp", "rank": rank, "size": world, "world_ranks": list(range(world)), "phase": None,
             "last_enqueued_seq": 5 if state5 != "none" else 4, "last_started_seq": last_started,
             "last_completed_seq": 4, "capacity": 2048, "dropped": 0, "entries": entries}
    timeout = reason == "timeout"
    save({"format": "shardtrain-flight-record", "format_version": 3, "job_id": job or "job-1", "rank": rank,
          "world_size": world, "hostname": "h", "pid": 100 + rank, "code_version": "test", "reason": reason,
          "dumped_at": t0 + 305, "timed_out_group": "dp" if timeout else None,
          "trigger": {"group": "dp", "seq": 5, "op": "AllReduce", "timeout_ms": 300000} if timeout else None,
          "triggers": [], "now": {"phase": "forward", "step": 3, "since": t0 + 4.5}, "phases": [], "groups": [group]},
         path)


@command(("source", str), ("out", str), ("version", int))
def make_format_version(source, out, version):
    """Writes the flight record source to out with its format_version set to version."""
    d = load(source)
    d["format_version"] = version
    save(d, out)


@command(("diagnosis", str), ("rank", int), ("seq", int))
def skipped_by(diagnosis, rank, seq):
    """hang-diagnose --json: a hang diagnosis whose culprit is rank, cause skipped, blocked at seq
    with rank alone not joined."""
    d = load(diagnosis)
    print("  verdict", d["verdict"], "culprit", d["culprit"])
    expect(d["format"] == "shardtrain-hang-diagnosis" and d["verdict"] == "hang",
           f"format {d['format']}, verdict {d['verdict']}; expected shardtrain-hang-diagnosis, hang")
    c, b = d["culprit"], d["blocked"]
    expect(c is not None and c["rank"] == rank and c["cause"] == "skipped", f"culprit {c}, expected rank {rank} (skipped)")
    expect(b is not None and b["seq"] == seq and b["not_joined"] == [rank],
           f"blocked {b}, expected seq {seq} with only rank {rank} not joined")


@command(("diagnosis", str), ("rank", int))
def no_dump_culprit(diagnosis, rank):
    """hang-diagnose --json (format_version 2): the culprit is rank, cause no-dump, not job-wide and
    on no known host (no summary culprit_host either), the only missing rank."""
    d = load(diagnosis)
    c = d["culprit"]
    expect(d["format_version"] == 2, f"format_version {d['format_version']}, expected 2")
    got = {k: c[k] for k in ("rank", "cause", "job_wide", "host")}
    want = {"rank": rank, "cause": "no-dump", "job_wide": False, "host": None}
    expect(got == want, f"culprit {c}, expected {want}")
    expect(d["summary"]["culprit_host"] is None and d["missing_ranks"] == [rank],
           f"summary culprit_host {d['summary']['culprit_host']}, missing ranks {d['missing_ranks']}; expected None, [{rank}]")


# ---- the randomised fault matrix (fault_matrix.sh) ----

FAULT_STEPS = 6              # --steps 6, steps 0..5
FAULT_CKPT_STEPS = [1, 3]    # --ckpt-every 2: saves after steps 1 and 3 (and 5, the last: not drawn)
FAULT_EVAL_STEPS = [1, 3]    # --eval-every 2
# Phases holding collectives, by layout (seen in their flight records): DDP the gradient all-reduce
# in backward; ZeRO-1/2 also the parameter all-gather in optimizer; ZeRO-3 and TP=2 collectives in
# forward, backward, optimizer and eval (parameter gathers; TP's activation all-reduces and logits
# gathers); every layout the checkpoint group's broadcast and all-gather in ckpt. (The step-end
# agreement collectives are in every step too, but step-end is not a phase of the draw.)
FAULT_COLLECTIVE_PHASES = {
    "ddp": ["backward", "ckpt"],
    "zero1": ["backward", "optimizer", "ckpt"],
    "zero2": ["backward", "optimizer", "ckpt"],
    "zero3": ["forward", "backward", "optimizer", "ckpt", "eval"],
    "tp2": ["forward", "backward", "optimizer", "ckpt", "eval"],
}
FAULT_PHASES = ["data", "forward", "backward", "optimizer", "ckpt", "eval"]
FAULT_KINDS = ["skip-collective", "wrong-count", "hang", "kill", "slow-data", "delay"]
FAULT_LAYOUTS = ["ddp", "zero1", "zero2", "zero3", "tp2"]
FAULT_CLASSES = {"skip-collective": "skipped-collective", "wrong-count": "mismatch", "hang": "hang-outside-collective",
                 "kill": "dead-rank", "slow-data": "hang-outside-collective", "delay": "hang-outside-collective"}


def fault_steps(phase):
    """The steps a fault in phase can be drawn at: the saves' for ckpt, the evaluations' for eval,
    else every step but the last."""
    return FAULT_CKPT_STEPS if phase == "ckpt" else FAULT_EVAL_STEPS if phase == "eval" else list(range(FAULT_STEPS - 1))


@command(("seed", int), ("count", int), ("timeout", int))
def fault_cases(seed, count, timeout):
    """The fault matrix's draw: count cases from random.Random(seed), one line each, "index W tool
    layout mode kind phase step rank spec expected_class". The kinds take turns and the layouts
    rotate; the world size (2, 4 or 6 for TP=2, else 2..6), mode, rank, phase and step are drawn, in
    that order (the same seed gives the same cases). A delay or slow data lasts three collective
    timeouts (timeout s) from its phase's first step. "ambiguous" where docs/RUNBOOK.md says no
    record can decide: a wrong count at W=2 in the first step that has the collective."""
    rng = random.Random(seed)
    for i in range(count):
        kind = FAULT_KINDS[i % len(FAULT_KINDS)]        # every kind equally often
        layout = FAULT_LAYOUTS[(i // len(FAULT_KINDS) + i) % len(FAULT_LAYOUTS)]
        W = rng.choice([2, 4, 6]) if layout == "tp2" else rng.randint(2, 6)
        mode = rng.choice(["fast", "det"])
        rank = rng.randrange(W)
        if kind in ("skip-collective", "wrong-count"):
            phase = rng.choice(FAULT_COLLECTIVE_PHASES[layout])
        elif kind == "slow-data":
            phase = "data"
        else:
            phase = rng.choice(FAULT_PHASES)
        step = rng.choice(fault_steps(phase))
        if kind in ("slow-data", "delay"):
            step = fault_steps(phase)[0]  # a delay acts on every entry of its phase: the first one times out
            ms = 3 * 1000 * timeout       # three collective timeouts: a straggler beyond the timeout
            spec = f"slow-data:rank={rank},ms={ms}" if kind == "slow-data" else f"delay:rank={rank},ms={ms},phase={phase}"
        else:
            spec = f"{kind}:rank={rank},step={step},phase={phase}"
        expected = FAULT_CLASSES[kind]
        # Undecidable: two ranks disagree on a size in the first step that has the collective: no
        # majority, no history.
        if kind == "wrong-count" and W == 2 and step == fault_steps(phase)[0]:
            expected = "ambiguous"
        tool = "fsdp-train" if layout.startswith("zero") else "ddp-train"
        print(i, W, tool, layout, mode, kind, phase, step, rank, spec, expected)


def fault_time(run, timeout):
    """When the fault happened, from the attempt's flight records: the first failure trigger
    (timeout, error, exit), less the timeout when it was a timeout; where there is none (a dead
    rank's survivors may write only records on mpirun's signal), the first signal; else None."""
    fault_at, signal_at = None, None
    for f in glob.glob(f"{run}/flight.attempt0/flight.rank*.json"):
        for t in load(f).get("triggers", []):
            if t["reason"] in ("timeout", "error", "exit"):
                at = t["at"] - (timeout if t["reason"] == "timeout" else 0)
                fault_at = at if fault_at is None else min(fault_at, at)
            elif t["reason"] == "signal":
                signal_at = t["at"] if signal_at is None else min(signal_at, t["at"])
    return fault_at if fault_at is not None else signal_at


@command(("run", str), ("rc", int), ("start", float), ("end", float), ("timeout", float), ("kind", str),
         ("phase", str), ("step", int), ("rank", int), ("expected", str))
def fault_case(run, rc, start, end, timeout, kind, phase, step, rank, expected):
    """One case of the fault matrix, run under run-resilient.sh --max-restarts 0 from start to end
    (epoch seconds), exit rc: prints one row, "ok  | ..." or "FAIL | ... | the problems", with the
    launcher's verdict (attempt0.verdict.json), the stop time and the diagnosis time, and exits 0
    either way (the script counts the FAIL rows). Problems: no verdict; exit 0; stopped later than
    timeout + 10 s after the fault (fault_time; the end: the verdict's command_ended_at, else end);
    a healthy rank named; not the expected class and rank (for "ambiguous": class ambiguous, no
    rank); a kill's blocked step before the kill's; otherwise not the injected phase and step."""
    problems = []
    try:
        with open(f"{run}/attempt0.verdict.json") as f:
            v = json.load(f)
    except (OSError, ValueError):
        v = {}
        problems.append("no verdict")
    if rc == 0:
        problems.append("the faulty job exited 0")
    fault_at = fault_time(run, timeout)
    stop_s = v.get("command_ended_at", end) - (fault_at if fault_at is not None else start)
    if stop_s > timeout + 10:
        problems.append(f"stopped {stop_s:.1f} s after the fault (limit {timeout + 10:.0f} s)")
    got = (v.get("class"), v.get("culprit_rank"), v.get("phase"), v.get("step"))
    if v.get("culprit_rank") not in (None, rank):
        problems.append(f"a healthy rank named: {v.get('culprit_rank')}")
    if expected == "ambiguous":
        if v.get("class") != "ambiguous" or v.get("culprit_rank") is not None:
            problems.append(f"expected ambiguous (no majority, no history), got {got}")
    elif (v.get("class"), v.get("culprit_rank")) != (expected, rank):
        problems.append(f"expected {expected} rank {rank}, got {v.get('class')} rank {v.get('culprit_rank')}")
    elif kind == "kill":
        # A kill leaves no record of the dead rank: the verdict's step is the survivors' blocked one.
        if v.get("step") is None or v["step"] < step:
            problems.append(f"the survivors' blocked step {v.get('step')} is before the kill's {step}")
    elif (v.get("phase"), v.get("step")) != (phase, step):
        problems.append(f"expected phase {phase} step {step}, got phase {v.get('phase')} step {v.get('step')}")
    print(("ok  " if not problems else "FAIL") + f" | {v.get('class')} rank {v.get('culprit_rank')} phase {v.get('phase')} "
          f"step {v.get('step')} | stop {stop_s:.1f} s | diag {v.get('diagnosis_s')} s"
          + ("" if not problems else " | " + "; ".join(problems)))


@command(("results", str))
def fault_times(results):
    """The fault matrix's rows (fault-case's, one per line): the median and largest diagnosis time
    ("diag S s") and stop time ("stop S s"), each line printed only where some row has the figure."""
    text = read_text(results)
    d = [float(m.group(1)) for m in re.finditer(r"diag ([0-9.]+) s", text)]
    s = [float(m.group(1)) for m in re.finditer(r"stop ([0-9.]+) s", text)]
    if d:
        print(f"diagnosis time (first trigger -> verdict line): median {statistics.median(d):.2f} s, max {max(d):.2f} s")
    if s:
        print(f"stop time after the fault: median {statistics.median(s):.1f} s, max {max(s):.1f} s")


# ---- datasets and exports (hf_export.sh, hf_import.sh, holdout_agreement.sh) ----

HF_WORDS = "the a model data train token shard layer head ring loss step cut off window byte text of to and in".split()


@command(("docs", str), ("holdout", str))
def make_dated_docs(docs, holdout):
    """Writes 60 random-word documents (seed 7) of one owner as data-prep JSONL: the first 44 of
    2024, the rest of 2025 (the hold-out of a 2024-12-31 cutoff), and the hold-out texts as a JSON
    list."""
    rng = random.Random(7)

    def doc():
        return " ".join(rng.choice(HF_WORDS) for _ in range(rng.randint(30, 120))) + "."
    hold = []
    with open(docs, "w") as f:
        for i in range(60):
            year = 2024 if i < 44 else 2025
            text = doc()
            if year == 2025:
                hold.append(text)
            f.write(json.dumps({"id": f"d{i}", "version": 1, "owner": "news", "event_time": f"{year}-03-01T00:00:00Z",
                                "available_time": f"{year}-03-02T00:00:00Z", "text": text}) + "\n")
    save(hold, holdout)


@command(("folder", str), ("--context", int, None), ("--vocab", int, None))
def hf_config(folder, context, vocab):
    """An export folder's config.json, generation_config.json and tokenizer.json: separator 0 as
    bos, eos and pad; the vocabulary and the context; a byte-level tokenizer without merges."""
    c, g = load(f"{folder}/config.json"), load(f"{folder}/generation_config.json")
    expect((c["bos_token_id"], c["eos_token_id"], c["pad_token_id"]) == (0, 0, 0), f"config.json {c}")
    expect(c["vocab_size"] == vocab and c["n_positions"] == context, f"config.json {c}")
    expect(g["max_length"] == context and g["eos_token_id"] == 0, f"generation_config.json {g}")
    t = load(f"{folder}/tokenizer.json")["model"]
    expect(len(t["vocab"]) == vocab and t["merges"] == [] and t["vocab"]["<|endoftext|>"] == 0,
           f"tokenizer.json: {len(t['vocab'])} entries, {len(t['merges'])} merges, <|endoftext|> {t['vocab'].get('<|endoftext|>')}")
    print(f"  config.json: bos/eos/pad 0, vocab {vocab}, context {context}; generation max_length {context}; "
          f"{vocab}-entry byte tokenizer")


@command(("summary", str), ("holdout_docs", str), ("out", str), ("--seq-len", int, None))
def make_holdout_spec(summary, holdout_docs, out, seq_len):
    """Writes what scripts/check-hf-export.py scores: the hold-out texts, the sample count and the
    trainer's hold-out loss from its summary, separator 0."""
    ev = load(summary)["eval"]
    save({"holdout_text": load(holdout_docs), "seq_len": seq_len, "samples": int(ev["holdout_tokens"]) // seq_len,
          "trainer_loss": ev["holdout_loss"], "separator": 0}, out)


@command(("report", str), ("source", str))
def imported_manifest(report, source):
    """ckpt-reshard --inspect --json of an imported checkpoint: step 0, and the manifest's source
    identity has the SHA-256 of the source folder's config.json and model.safetensors."""
    r = load(report)
    m = r.get("manifest", r)
    step = m.get("step", r.get("step"))
    expect(step == 0, f"step {step}, expected 0")
    expect("extra" in m, "the manifest has no extra.imported_from")
    files = {f["name"]: f["sha256"] for f in m["extra"]["imported_from"]["files"]}
    for name in ("config.json", "model.safetensors"):
        with open(f"{source}/{name}", "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        expect(files.get(name) == want, f"{name}: recorded sha256 {files.get(name)}, the file's {want}")
    print(f"  step 0; source identity: {', '.join(f'{k} {v[:12]}' for k, v in files.items())}")


LLMC_MAGIC, LLMC_EOT = 20240520, 50256


@command(("shard", str), ("docs", str))
def make_llmc_shard(shard, docs):
    """Writes an llm.c token shard (256 int32 header: magic 20240520, version 1, N; then N uint16
    tokens, each document preceded by end-of-text 50256) of 40 random documents (seed 11, one of
    them holding the largest id and 0), and the documents as JSON."""
    rng = random.Random(11)
    documents = [[rng.randrange(0, LLMC_EOT) for _ in range(rng.randint(20, 300))] for _ in range(40)]
    documents[3] = [LLMC_EOT - 1, 0, 1]  # the largest id, and 0
    tokens = []
    for d in documents:
        tokens += [LLMC_EOT] + d
    header = [LLMC_MAGIC, 1, len(tokens)] + [0] * 253
    with open(shard, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
    save(documents, docs)


@command(("summary", str), ("docs", str))
def llmc_summary(summary, docs):
    """data-prep --llmc's summary: every document and token of the shard, GPT-2's vocabulary,
    separator 50256, 16-bit tokens."""
    s, documents = load(summary), load(docs)
    expect(s["documents"] == len(documents) and s["tokens"] == sum(map(len, documents)),
           f"{s['documents']} documents, {s['tokens']} tokens; expected {len(documents)}, {sum(map(len, documents))}")
    got = (s["vocab"], s["tokenizer"], s["separator_token"], s["token_bits"])
    expect(got == (50257, "gpt2", LLMC_EOT, 16), f"(vocab, tokenizer, separator, bits) {got}")
    print(f"  data-prep --llmc: {s['documents']} documents, {s['tokens']} tokens, vocab {s['vocab']} ({s['tokenizer']})")


@command(("source", str), ("out", str), ("owners", str, "+"))
def relabel_owners(source, out, owners):
    """Writes the JSONL documents of source with their owners taken in turn from owners (document
    k gets owners[k % len(owners)])."""
    with open(source) as f, open(out, "w") as o:
        for k, line in enumerate(f):
            d = json.loads(line)
            d["owner"] = owners[k % len(owners)]
            o.write(json.dumps(d) + "\n")


@command(("summary", str), ("evaluation", str), ("name", str))
def holdout_agreement(summary, evaluation, name):
    """The trainer's hold-out loss (summary eval) and release-gate eval's (scores) are the same
    number bit for bit, over the same token count; per owner within 1e-12 relative."""
    s, e = load(summary)["eval"], load(evaluation)["scores"]
    trainer, gate = s["holdout_loss"], e["loss"]
    print(f"  {name}: trainer {trainer!r} over {s['holdout_tokens']:.0f} tokens, release-gate {gate!r} over {e['tokens']} tokens")
    expect(s["holdout_tokens"] == e["tokens"], "different positions scored")
    expect(trainer == gate, f"{trainer!r} != {gate!r}")
    owners_t = s["holdout_loss_by_owner"]
    owners_g = {x["name"]: x["loss"] for x in e["slices"] if x["kind"] == "owner"}
    expect(owners_t.keys() == owners_g.keys(), f"owners {sorted(owners_t)} vs {sorted(owners_g)}")
    for k in owners_t:
        expect(abs(owners_t[k] - owners_g[k]) <= 1e-12 * owners_g[k], f"owner {k}: {owners_t[k]!r} vs {owners_g[k]!r}")


# ---- release-gate (release_gate.sh) ----

@command(("work", str))
def make_release_corpus(work):
    """From data-prep's synthetic m1.jsonl and m2.jsonl in work: full.jsonl with m1's documents as
    owner alice (ids alice-NNN; the documents from 17 on version 2) and m2's as bob; nobob.jsonl
    the same without bob's documents up to 2024-01-15 (the cutoff: only his hold-out stays)."""
    def docs(seed, owner):
        for d in load_lines(f"{work}/m{seed}.jsonl"):
            k = int(d["id"].split("-")[1])
            d["owner"], d["id"] = owner, f"{owner}-{k:03d}"
            if owner == "alice" and k >= 17:
                d["version"] = 2
            yield d
    alice, bob = list(docs(1, "alice")), list(docs(2, "bob"))
    with open(f"{work}/full.jsonl", "w") as f:
        for d in alice + bob:
            f.write(json.dumps(d) + "\n")
    with open(f"{work}/nobob.jsonl", "w") as f:
        for d in alice + [d for d in bob if d["event_time"] > "2024-01-15"]:
            f.write(json.dumps(d) + "\n")


@command(("work", str), ("out", str), ("plant_from", int), ("plant_to", int))
def make_cycle_corpus(work, out, plant_from, plant_to):
    """The continual cycles' corpus (release_cycles.sh) from data-prep's synthetic m1, m2 and m3.jsonl
    in work: owner alice writes m1's document k on day k, owner bob m2's (ids alice-NNN, bob-NNN), at
    12:00 UTC (event) and published an hour later (available); bob's documents of the days
    plant_from <= k < plant_to are m3's instead (text of another kind; 0 0: none). Writes out."""
    def docs(seed, owner):
        out = []
        for d in load_lines(f"{work}/m{seed}.jsonl"):
            k = int(d["id"].split("-")[1])
            day = datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc) + datetime.timedelta(days=k)
            d["owner"], d["id"] = owner, f"{owner}-{k:03d}"
            d["event_time"] = day.strftime("%Y-%m-%dT%H:%M:%SZ")
            d["available_time"] = (day + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            out.append((k, d))
        return out
    planted = dict(docs(3, "bob"))
    bob = [(k, planted[k] if plant_from <= k < plant_to else d) for k, d in docs(2, "bob")]
    with open(out, "w") as f:
        for _, d in sorted(docs(1, "alice") + bob, key=lambda kd: (kd[1]["event_time"], kd[1]["owner"])):
            f.write(json.dumps(d) + "\n")


@command(("monitoring", str), ("rollback", str))
def monitored_rollback(monitoring, rollback):
    """The rollback rules (docs/FORMATS.md "Release policy", "rollback") applied again, here, to the
    intervals a monitoring record stores, with the bounds read from its policy file: every recorded
    check's outcome, the verdict, and the rollback record's slices must follow from them."""
    m, b = load(monitoring), load(rollback)
    rules = load(m["policy"]["path"])["rollback"]
    now, then = m["matured"]["scores"], m["release_time"]
    want = {"matured_loss": not now["interval"]["lower"] > then["interval"]["upper"] + rules["max_matured_loss_excess"],
            "drift": not m["input_quality"]["drift_jsd_bits"] > rules["max_drift_jsd"]}
    before = {s["key"]: s for s in then["slices"]}
    for s in now["slices"]:
        if s["key"] in before:
            want["slice_regression:" + s["key"]] = not s["lower"] > before[s["key"]]["upper"] + rules["max_slice_regression"]
    got = {c["name"]: c["passed"] for c in m["checks"] if c["applicable"]}
    expect(got == want, f"recorded checks {got}, the rules give {want}")
    failed = sorted(k[len("slice_regression:"):] for k, ok in want.items() if not ok and k.startswith("slice_regression:"))
    expect(sorted(b["slices"]) == failed, f"the rollback names slices {b['slices']}, the rules {failed}")
    expect((m["verdict"] == "rolled_back") == (not all(want.values())), f"verdict {m['verdict']} for checks {want}")
    for k, ok in sorted(want.items()):
        print(f"  {k}: {'pass' if ok else 'FAIL'}")


@command(("policy", str), ("out", str))
def make_no_value_policy(policy, out):
    """Writes policy with a value of 0 per nat-token saved (its version marked -no-value)."""
    p = load(policy)
    p["utility"]["value_per_nat_token"] = 0
    p["version"] += "-no-value"
    save(p, out)


@command(("out", str))
def make_costs(out):
    """Writes a small cost table (shardtrain-costs version 1: storage, preprocessing, one train
    stage of 10 core-seconds), as the pipeline leaves in a run folder."""
    save({"format": "shardtrain-costs", "version": 1, "source": "local",
          "storage_bytes": {"dataset": 100, "checkpoints": 2000, "records": 30, "total": 2130}, "preprocessing_s": 0.25,
          "stages": [{"stage": "train", "job_id": None, "state": "COMPLETED", "cpus": 2, "run_s": 5.0,
                      "compute_core_s": 10.0, "queue_wait_s": 0.0}]}, out)


@command(("registry", str))
def strip_per_sequence(registry):
    """Removes the per-sequence losses from last-known-good's record, as a registry written
    before they were recorded has it."""
    p = load(f"{registry}/last-known-good")["record"]
    r = load(f"{registry}/{p}")
    del r["scores"]["candidate"]["scores"]["per_sequence"]
    save(r, f"{registry}/{p}")


MASK64, GOLDEN = (1 << 64) - 1, 0x9E3779B97F4A7C15


def mix64(z):
    """SplitMix64's finaliser, as the C++ bootstrap (bootstrap.hpp) draws with it."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


@command(("record",))
def utility(record):
    """A release record's utility by hand from its own inputs: the losses are the evaluations',
    E = H (v N s - c L) - B P for the saved loss and both bounds (1e-9 relative), and, where both
    evaluations have per-sequence losses, the probability of regret replayed with bootstrap.hpp's
    draws (the same count of regretted resamples). Prints one line of the figures."""
    r = load(record)
    u, m = r["utility"], r["utility"]["model"]
    fb = r["scores"]["baseline"] if u["fallback"] == r["baseline"]["name"] else None
    c = r["scores"]["candidate"]["scores"]
    expect(abs(u["candidate_loss"] - c["loss"]) < 1e-9, f"candidate_loss {u['candidate_loss']}, evaluated {c['loss']}")
    if fb is not None:
        expect(abs(u["fallback_loss"] - fb["scores"]["loss"]) < 1e-9,
               f"fallback_loss {u['fallback_loss']}, evaluated {fb['scores']['loss']}")
    expect(abs(u["loss_saved"] - (u["fallback_loss"] - u["candidate_loss"])) < 1e-9,
           f"loss_saved {u['loss_saved']} is not fallback - candidate")
    H, vN = m["horizon_days"], m["value_per_nat_token"] * m["served_tokens_per_day"]
    cL = m["cost_per_ms_p99_day"] * u["latency"]["delta_ms"]

    def U(s):
        return H * (vN * s - cL)
    P, B = u["regret_probability"], m["bad_release_cost"]
    for key, s in (("expected_utility", u["loss_saved"]), ("lower", u["loss_saved_lower"]), ("upper", u["loss_saved_upper"])):
        want = U(s) - B * P
        expect(abs(u[key] - want) <= 1e-9 * max(1, abs(want)), f"{key} {u[key]}, by hand {want}")
    cs = c["per_sequence"]
    fs = (fb if fb is not None else {"scores": {}})["scores"].get("per_sequence")
    if fs is not None:
        d = [f - x for f, x in zip(fs["loss_sums"], cs["loss_sums"])]
        t, n, R, seed = cs["tokens"], len(d), u["bootstrap"]["resamples"], u["bootstrap"]["seed"]
        regret = 0
        for k in range(R):
            idx = [(mix64((seed + (k * n + j + 1) * GOLDEN) & MASK64) * n) >> 64 for j in range(n)]
            regret += U(sum(d[i] for i in idx) / sum(t[i] for i in idx)) < 0
        expect(regret == u["regret_resamples"] and abs(P - regret / R) < 1e-12,
               f"replayed {regret} regretted resamples, recorded {u['regret_resamples']} (P {P})")
    items = {i["item"]: i["passed"] for i in r["rubric"]["items"]}
    print(f"E = {H:g} x ({vN:g} x {u['loss_saved']:.6f} - {cL:g}) - {B:g} x {P:.4f} = {u['expected_utility']:.2f} "
          f"({u['lower']:.2f} to {u['upper']:.2f}); P(regret) {u['regret_resamples']}/{u['bootstrap']['resamples']}"
          f"{' replayed' if fs is not None else ''}; evidence {sum(items.values())}/{len(items)}; "
          f"costs {'null' if r['costs'] is None else 'present'}")


@command(("record", str))
def promoted_record(record):
    """A promoted release record: all five rubric items passed (score 1), a positive utility with
    the regret within its bound, and no cost table."""
    r = load(record)
    items = r["rubric"]["items"]
    expect(all(i["passed"] for i in items) and len(items) == 5, f"rubric {r['rubric']}")
    expect(r["rubric"]["score"] == 1.0 and r["utility"]["positive"] and r["utility"]["regret_within_bound"],
           f"score {r['rubric']['score']}, utility positive {r['utility']['positive']}, "
           f"regret within bound {r['utility']['regret_within_bound']}")
    expect(r["costs"] is None, f"costs {r['costs']}, expected null")


@command(("registry", str))
def registry_whole(registry):
    """A release registry after a kill: every release, monitoring and rollback record whole JSON,
    last-known-good names a record that exists and is whole, and a pointer moved by a rollback
    names a whole rollback record whose monitoring record exists and which put back that record."""
    for sub in ("records", "monitoring", "rollbacks"):
        if os.path.isdir(f"{registry}/{sub}"):
            for n in os.listdir(f"{registry}/{sub}"):
                if n.endswith(".json"):
                    load(f"{registry}/{sub}/{n}")   # whole, or not there at all
    p = load(f"{registry}/last-known-good")
    if p.get("baseline"):   # a rollback put a registered baseline back: its model file as recorded
        b = p["baseline"]
        with open(os.path.join(registry, b["model_file"]), "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        expect(sha == b["sha256"], f"last-known-good names baseline {b['name']} of sha256 {b['sha256']}, its model is {sha}")
        expect(p["record"] is None, f"last-known-good names baseline {b['name']} and record {p['record']}")
        load(os.path.join(registry, b["file"]))
    else:
        path = os.path.join(registry, p["record"])
        expect(os.path.exists(path), f"last-known-good names {p['record']}, which does not exist")
        load(path)
    if p.get("rollback"):
        b = load(os.path.join(registry, p["rollback"]))
        put_back = b.get("to_baseline") or b["to"]
        expect(put_back == (p.get("baseline") or {"record": p["record"], "checkpoint": p["checkpoint"],
                                                  "manifest_sha256": p["manifest_sha256"]}),
               f"the pointer ({p}) is not what its rollback put back ({put_back})")
        expect(os.path.exists(os.path.join(registry, b["monitoring_record"])),
               f"the rollback's monitoring record {b['monitoring_record']} does not exist")


@command(("index", int), ("duration", float))
def kill_delay(index, duration):
    """The seconds after which kill number index lands in a run of duration s (seeded by index):
    odd kills anywhere in the run, even ones in its last fifth (the record and pointer writes)."""
    r = random.Random(index)
    print(round(duration * r.uniform(0.8 if index % 2 == 0 else 0, 1), 4))


# ---- the kill-resume proof (kill_resume_adjacent.sh) ----

@command(("work", str))
def adjacent_kills(work):
    """kill-resume-proof's kills.jsonl and restarts.json for kill_resume_adjacent.sh's plan (a save
    kill during step_6's write, a step kill at 6, a save kill during step_10's write, a node loss
    at 10): one attempt per kill, in order (each kill after a save kill hits the attempt after it);
    both save kills interrupted their write; each save kill's next attempt resumed from the
    checkpoint before the interrupted one; the restarts resumed from step 4, 6, 8, 10, the last
    on 2 ranks of 3, each after a failed attempt."""
    kills = load_lines(f"{work}/kills.jsonl")
    restarts = load(f"{work}/restarts.json")["restarts"]
    expect([k["attempt"] for k in kills] == [0, 1, 2, 3], f"kills {kills}: expected attempts 0, 1, 2, 3")
    saves = [(k["interrupted"], k.get("outcome")) for k in kills if k["mode"] == "during-save"]
    expect(saves == [("step_00000006", "write interrupted"), ("step_00000010", "write interrupted")],
           f"save kills {saves}: expected the writes of step_00000006 and step_00000010 interrupted")
    expect(kills[0]["latest_at_kill"] == "step_00000004" and kills[2]["latest_at_kill"] == "step_00000008",
           f"latest checkpoints at the save kills {kills[0]['latest_at_kill']}, {kills[2]['latest_at_kill']}; "
           "expected step_00000004, step_00000008")
    resumed = [r["resumed_from"] for r in restarts]
    expect(resumed == ["step_00000004", "step_00000006", "step_00000008", "step_00000010"],
           f"restarts resumed from {resumed}")
    worlds = [(r["previous_world_size"], r["world_size"]) for r in restarts]
    expect(worlds == [(3, 3), (3, 3), (3, 3), (3, 2)], f"restart world sizes {worlds}, expected W 3 -> 2 at the last")
    expect(all(r["previous_exit_status"] != 0 for r in restarts),
           f"a restart after an attempt that exited 0: {[r['previous_exit_status'] for r in restarts]}")
    print(f"  kills in attempts {[k['attempt'] for k in kills]}; restarts from {resumed}, world sizes {worlds}")


# ---- scale-bench (scale_report.sh) ----

@command(("series", str))
def scale_report(series):
    """scale-bench run's report.json and report.md for W = 1, 2, 4 (weak scaling): the global batch
    scaled by W; oversubscribed exactly where W > this host's CPUs (marked in the table); per-point
    recomputation, ranks and actions; W=1 within tolerance of its own logs; and the formula line
    E(W) = t_W / (W x t_1) quoting report.json's numbers (0.5 tokens/s, E to 0.0005), never an
    oversubscribed point while a measured one exists."""
    r = load(f"{series}/report.json")
    md = read_text(f"{series}/report.md")
    pts = {p["world_size"]: p for p in r["points"]}
    expect(sorted(pts) == [1, 2, 4], f"points at W={sorted(pts)}")
    expect(r["mode"] == "weak", f"mode {r['mode']}")
    expect([pts[w]["global_batch"] for w in (1, 2, 4)] == [4, 8, 16], "weak scaling multiplies --global-batch by W")
    cpus = load(f"{series}/w1/summary.json")["host"]["cpus"]
    expect(cpus == os.cpu_count(), f"summary host cpus {cpus}, this host {os.cpu_count()}")
    for w, p in pts.items():
        expect(p["oversubscribed"] == (w > cpus), f"W={w} on {cpus} CPUs: oversubscribed {p['oversubscribed']}")
        expect(p["recomputed"] and p["recomputed"]["throughput_tokens_per_s"] > 0, f"W={w}: no recomputation")
        expect(len(p["ranks"]) == w and p["actions"], f"W={w}: ranks or actions missing")
        rows = [line for line in md.splitlines() if line.startswith(f"| {w} | ")]
        expect(rows, f"report.md has no row for W={w}")
        expect(("**oversubscribed**" in rows[0]) == (w > cpus), f"report.md row {rows[0]}")
        print(f"  W={w}: {p['throughput_tokens_per_s']:.0f} tokens/s, E {p['efficiency']:.3f}, from logs "
              f"{p['recomputed']['efficiency']:.3f}, within tolerance {p['within_tolerance']}, "
              f"oversubscribed {p['oversubscribed']}, slowest rank {p['slowest_rank']} ({p['slowest_section']})")
    expect(pts[1]["within_tolerance"], "W=1: the summary and its own step logs disagree")
    if cpus < 4:
        expect(pts[4]["oversubscribed"] and any("oversubscribed" in a for a in pts[4]["actions"]),
               "W=4 on fewer CPUs: not oversubscribed, or no action says so")
    m = re.search(r"E\((\d+)\) = ([\d,]+) / \((\d+) x ([\d,]+)\) = (\d\.\d{3})", md)
    expect(m, "no formula line in report.md")
    w = int(m.group(1))
    t_w, t_1 = float(m.group(2).replace(",", "")), float(m.group(4).replace(",", ""))
    expect(int(m.group(3)) == w and w in pts and w > 1, f"formula {m.group(0)}: not a measured W > 1")
    expect(abs(t_w - pts[w]["throughput_tokens_per_s"]) <= 0.5 and abs(t_1 - pts[1]["throughput_tokens_per_s"]) <= 0.5,
           f"formula {m.group(0)}: throughputs are not report.json's")
    expect(abs(float(m.group(5)) - pts[w]["efficiency"]) <= 0.0005, "the formula's E is not the report's")
    expect(not (pts[w]["oversubscribed"] and not all(pts[x]["oversubscribed"] for x in pts if x > 1)),
           "formula quotes an oversubscribed point")
    print(f"  formula: {m.group(0)}")


def svg_texts(root):
    """Every <text> element's text in an SVG, stripped."""
    return [("".join(t.itertext())).strip() for t in root.iter() if t.tag.endswith("text")]


def data_rows(path):
    """The rows of a gnuplot .dat file, comments and empty lines left out."""
    return [line for line in read_text(path).splitlines() if line.strip() and not line.startswith("#")]


@command(("series", str))
def scale_svgs(series):
    """The report's plots parse as XML: efficiency and speedup have one placed marker per W plus
    one per series in the key (measured, and oversubscribed only where such a point is) and a
    label per W; the breakdown one bar per (W, rank), labelled r<rank>, grouped by W."""
    for name in ("efficiency", "speedup"):
        root = ET.parse(f"{series}/{name}.svg").getroot()
        rows = [line.split() for line in data_rows(f"{series}/{name}.dat")]
        # Placed markers: <use href="#gpPtN" transform="translate(x,y) ..."> (the <defs> hold the shapes).
        markers = [e for e in root.iter() if e.tag.endswith("use") and "gpPt" in str(e.attrib)
                   and "translate(" in e.attrib.get("transform", "")]
        labels = [t for t in svg_texts(root) if t.startswith("W=")]
        print(f"  {name}.svg: {len(rows)} data rows, {len(markers)} markers (with 2 in the key), labels {labels}")
        expect(len(rows) == 3, f"{name}.dat rows {rows}")
        over = any(row[2] == "1" for row in rows)
        expect(len(markers) == len(rows) + 1 + over, f"{name}: {len(markers)} markers for {len(rows)} points")
        expect(("oversubscribed" in read_text(f"{series}/{name}.gp")) == over, f"{name}: oversubscribed series in the key")
        want = ["W=1", "W=2", "W=4 oversubscribed" if rows[2][2] == "1" else "W=4"]
        expect(sorted(labels) == sorted(want), f"{name} labels {labels}, expected {want}")
    root = ET.parse(f"{series}/breakdown.svg").getroot()
    bars = data_rows(f"{series}/breakdown.dat")
    groups = [t for t in svg_texts(root) if t.startswith("W=")]
    ranks = [t for t in svg_texts(root) if t.startswith("r") and t[1:].isdigit()]
    print(f"  breakdown.svg: {len(bars)} bars, rank labels {ranks}, group labels {groups}")
    expect(len(bars) == 1 + 2 + 4, f"breakdown bars {bars}")
    expect(sorted(ranks) == sorted(["r0", "r0", "r1", "r0", "r1", "r2", "r3"]), f"rank labels {ranks}")
    over4 = load(f"{series}/report.json")["points"][2]["oversubscribed"]
    expect(sorted(groups) == ["W=1", "W=2", "W=4 oversubscribed" if over4 else "W=4"], f"group labels {groups}")


@command(("report_dir", str), ("prediction", str))
def model_prediction(report_dir, prediction):
    """scale-bench report --step-model: every point's predicted E is the model's (scale-bench predict
    --json rows, 1e-9), and the efficiency plot draws the prediction."""
    points = load(f"{report_dir}/report.json")["points"]
    model = {row["workers"]: row["efficiency"] for row in load(prediction)["rows"]}
    for p in points:
        w = p["world_size"]
        print(f"  W={w}: measured E {p['efficiency']:.3f}, predicted {p['predicted_efficiency']:.3f} (model: {model[w]:.3f})")
        expect(abs(p["predicted_efficiency"] - model[w]) < 1e-9, f"W={w}: the report's prediction is not the model's")
    expect("model prediction" in read_text(f"{report_dir}/efficiency.gp"), "no prediction curve in the plot")


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


# ---- the Slurm chain (slurm_chain.sh) ----

CHAIN_WORDS = "the a cluster job node rank step loss model data train check point queue time limit save resume".split()


def iso_utc(seconds):
    """Epoch seconds as ISO 8601 UTC (2001-01-01T00:00:00Z)."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@command(("out", str))
def make_chain_corpus(out):
    """Writes data-prep JSONL of 240 documents (seed 23) by four owners in turn, their times spread
    evenly over 2001..2021 (available a day later), each 30 to 60 words of a seeded word chain (a
    model has something to learn)."""
    rng = random.Random(23)
    words = CHAIN_WORDS
    with open(out, "w") as f:
        for i in range(240):
            owner = ["ada", "bob", "cy", "dee"][i % 4]
            t = 978307200 + (i * 631152000) // 240
            w, text = rng.choice(words), []
            for _ in range(rng.randint(30, 60)):
                text.append(w)
                w = words[(words.index(w) * 7 + rng.randint(0, 2)) % len(words)]
            f.write(json.dumps({"id": f"{owner}/{i}", "version": 1, "owner": owner, "event_time": iso_utc(t),
                                "available_time": iso_utc(t + 86400), "text": " ".join(text) + "."}) + "\n")


@command(("run", str), ("registry", str))
def chain_release(run, registry):
    """The chain's run folder and release registry after pipeline --sbatch: --steps, --np and
    --base-steps reached the jobs (main run 600 steps on 2 ranks, baseline 10 on 1, twin 10 on 2);
    replica checks ran; the twin BITWISE; a scaling report at W = 1, 2, 4 with efficiency and
    oversubscription as the hosts' CPUs say; one release record of the candidate with all evidence
    found and passing, promoted with a positive utility and the regret within its bound, and
    last-known-good moved to it; one record of the planted bad candidate, rejected on its loss rise
    with the chain's candidate in service; costs.json from scontrol with queue waits, storage and
    preprocessing."""
    for d, steps, w in ((run, 600, 2), (f"{run}/baseline", 10, 1), (f"{run}/twin", 10, 2)):
        s = load(f"{d}/summary.json")
        expect((s["steps"], s["world_size"]) == (steps, w), f"{d}: steps {s['steps']}, W {s['world_size']}: wanted {steps}, {w}")
        print(f"    {os.path.relpath(d, run) if d != run else 'main run'}: {s['steps']} steps on {s['world_size']} ranks")
    checks_run = load(f"{run}/summary.json")["replica_checks"]["checks"]
    expect(checks_run >= 1, f"{checks_run} replica checks in the main run, expected at least 1")
    eq = load(f"{run}/evidence/equivalence.json")
    expect(eq["verdict"] == "BITWISE", f"the twin is {eq['verdict']}, not BITWISE")
    rep = load(f"{run}/evidence/scaling/report.json")
    pts = [(p["world_size"], round(p["efficiency"], 3), p["oversubscribed"]) for p in rep["points"]]
    print(f"    scaling report: efficiency_available {rep['efficiency_available']}, (W, E, oversubscribed) = {pts}")
    expect(rep["efficiency_available"] and sorted(w for w, _, _ in pts) == [1, 2, 4],
           f"efficiency_available {rep['efficiency_available']}, points {pts}: expected W = 1, 2, 4")
    for p in rep["points"]:
        expect(p["oversubscribed"] == (p["host"]["cpus"] > 0 and p["world_size"] > p["host"]["cpus"]),
               f"W={p['world_size']} on {p['host']['cpus']} CPUs: oversubscribed {p['oversubscribed']}")
    recs = [load(f) for f in sorted(glob.glob(f"{registry}/records/*.json"))]
    mine = [r for r in recs if r["artifact"]["folder"].startswith(f"{run}/checkpoints/")]
    expect(len(mine) == 1, f"{len(mine)} release records of the chain's candidate")
    rec = mine[0]
    items = rec["rubric"]["items"]
    for it in items:
        print(f"    evidence {it['item']}: found {it.get('found')}, passed {it.get('passed')} ({it.get('detail')})")
    missing = [it for it in items if not (it.get("found") and it.get("passed"))]
    expect(not missing, f"evidence missing or failing: {missing}")
    print(f"    rubric score {rec['rubric'].get('score')} (min {rec['rubric'].get('min_score')}); decision {rec.get('decision')}")
    for reason in rec.get("reasons", []):
        print(f"      reason: {reason}")
    expect(rec["decision"] == "promote", f"the chain's candidate was not promoted: {rec.get('reasons')}")
    u = rec["utility"]
    print(f"    utility of promoting over {u['fallback']}: E = {u['expected_utility']:.2f} "
          f"(95% interval {u['lower']:.2f} to {u['upper']:.2f}), P(regret) {u['regret_probability']:.4f}")
    expect(u["positive"] and u["regret_within_bound"], f"utility {u}: expected positive, the regret within its bound")
    lkg = load(f"{registry}/last-known-good")
    promoted = load(os.path.join(registry, lkg["record"]))
    expect(promoted["artifact"]["folder"] == rec["artifact"]["folder"], f"last-known-good is {lkg}, not the chain's record")
    bad = [r for r in recs if "/run/bad/checkpoints/" in r["artifact"]["folder"]]
    expect(len(bad) == 1, f"{len(bad)} release records of the planted bad candidate")
    bad = bad[0]
    print(f"    planted bad candidate {os.path.basename(bad['artifact']['folder'])}: decision {bad['decision']}, "
          f"against {bad['baseline']['name']}, in service {bad['in_service']['name']} ({bad['in_service'].get('checkpoint')})")
    for reason in bad["reasons"]:
        print(f"      reason: {reason}")
    expect(bad["decision"] == "reject", "the planted bad candidate was promoted")
    expect(bad["in_service"].get("checkpoint") == rec["artifact"]["folder"],
           f"in service at the bad candidate's decision: {bad['in_service']}, expected the chain's candidate")
    expect(any(x.startswith("loss_rise") for x in bad["reasons"]), "the bad candidate was not rejected on its loss")
    c = load(f"{run}/costs.json")
    expect(c["source"] == "scontrol show job", f"costs.json source {c['source']}, expected scontrol show job")
    expect(all("queue_wait_s" in s for s in c["stages"] if s.get("started")), "a stage without its queue wait")
    expect(c["storage_bytes"]["dataset"] > 0 and c["storage_bytes"]["checkpoints"] > 0,
           f"storage_bytes {c['storage_bytes']}: expected dataset and checkpoints above 0")
    expect(c["preprocessing_s"] is not None and c["preprocessing_s"] > 0, f"preprocessing_s {c['preprocessing_s']}, expected > 0")


# ---- the machine (slurm_cluster.sh) ----

@command(("count", int))
def free_ports(count):
    """Prints count free loopback TCP ports (bound together, then released for a daemon to take)."""
    ss = [socket.socket() for _ in range(count)]
    for s in ss:
        s.bind(("127.0.0.1", 0))
    print(*[s.getsockname()[1] for s in ss])
    for s in ss:
        s.close()


@command(("count", int))
def free_port_run(count):
    """Prints a port P such that P .. P + count - 1 are free on loopback (a metrics endpoint's
    ranks take consecutive ports)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 60000 - count)
        ss = []
        try:
            for p in range(base, base + count):
                s = socket.socket()
                ss.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s in ss:
                s.close()
        print(base)
        return
    raise Unusable(f"no {count} consecutive free loopback ports found")


# ---- live metrics (tests/scripts/metrics_alerts.sh) ----

def http_json(url):
    """The JSON answer of a GET on url (a loopback server the test started)."""
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def wait_for(what, seconds, probe):
    """Calls probe() every 0.5 s until it returns a true value (returned) or seconds pass (Failed
    naming what, with probe's last answer)."""
    import time
    deadline, last, err = time.monotonic() + seconds, None, "none"
    while True:
        try:
            last = probe()
        except OSError as e:
            last = None
            err = e
        if last:
            return last
        if time.monotonic() > deadline:
            expect(False, f"{what}: not seen within {seconds} s (last answer {last if last is not None else err})")
        time.sleep(0.5)


@command(("run", str), ("world", int), ("base_port", int), ("host", str))
def metrics_targets(run, world, base_port, host):
    """The job's service-discovery file: one target per rank at 127.0.0.1:BASE+rank (one host),
    labelled with its rank, the host, the run folder and the step log's data snapshot and code
    version."""
    targets = load(f"{run}/prometheus-targets.json")
    expect(len(targets) == world, f"{len(targets)} targets, expected {world}")
    ident = load_lines(f"{run}/steps.rank0.jsonl")[0]
    for r, t in enumerate(targets):
        lab = t["labels"]
        expect(t["targets"] == [f"127.0.0.1:{base_port + r}"], f"rank {r}: targets {t['targets']}")
        expect(lab["rank"] == str(r) and lab["host"] == host and lab["run_dir"] == os.path.realpath(run),
               f"rank {r}: labels {lab}, expected host {host} and run_dir {os.path.realpath(run)}")
        expect(lab["data_snapshot"] == ident["data_snapshot_id"] and lab["code_version"] == ident["code_version"],
               f"rank {r}: labels {lab}, the step log says {ident['data_snapshot_id']} {ident['code_version']}")
    print(f"  {run}/prometheus-targets.json: {world} targets on ports {base_port}..{base_port + world - 1}, host {host}")


@command(("prometheus", str), ("run", str), ("world", int), ("host", str), ("seconds", int))
def prom_series(prometheus, run, world, host, seconds):
    """Prometheus (its HTTP API at PROMETHEUS) holds every rank's series of the run: each metric
    of the step loop once per rank, every one labelled with the run's host."""
    import urllib.parse
    run = os.path.realpath(run)
    names = ["shardtrain_step", "shardtrain_loss", "shardtrain_tokens_per_second", "shardtrain_learning_rate",
             "shardtrain_grad_norm", "shardtrain_mfu_ratio", "shardtrain_last_step_timestamp_seconds"]

    def probe():
        found = {}
        for n in names:
            q = urllib.parse.quote(f'{n}{{run_dir="{run}"}}')
            res = http_json(f"{prometheus}/api/v1/query?query={q}")["data"]["result"]
            found[n] = sorted((x["metric"].get("rank"), x["metric"].get("host")) for x in res)
        want = [(str(r), host) for r in range(world)]
        return found if all(v == want for v in found.values()) else None
    found = wait_for(f"every rank's series of {run} in Prometheus", seconds, probe)
    print(f"  Prometheus has {len(found)} metrics x ranks {[r for r, _ in found['shardtrain_step']]}, host {host}")


@command(("prometheus", str), ("run", str), ("host", str), ("port", int), ("restarts", int), ("world", int),
         ("verdict_class", str), ("culprit_rank", str), ("seconds", int))
def launcher_series(prometheus, run, host, port, restarts, world, verdict_class, culprit_rank, seconds):
    """The resilient launcher's endpoint is named in RUN/prometheus-launcher-targets.json
    (127.0.0.1:PORT, labelled with the run folder and HOST), and Prometheus holds its series of the
    run within SECONDS while an attempt runs: RESTARTS restarts, WORLD ranks, an exit status of the
    failed attempt, and the last verdict labelled VERDICT_CLASS, CULPRIT_RANK and HOST."""
    import urllib.parse
    run = os.path.realpath(run)
    targets = load(f"{run}/prometheus-launcher-targets.json")
    expect(len(targets) == 1 and targets[0]["targets"] == [f"127.0.0.1:{port}"],
           f"prometheus-launcher-targets.json: {targets}, expected one target 127.0.0.1:{port}")
    expect(targets[0]["labels"].get("run_dir") == run and targets[0]["labels"].get("host") == host,
           f"the launcher's target labels {targets[0]['labels']}, expected run_dir {run} and host {host}")

    def value(name):
        q = urllib.parse.quote(f'{name}{{run_dir="{run}"}}')
        res = http_json(f"{prometheus}/api/v1/query?query={q}")["data"]["result"]
        return res[0] if len(res) == 1 else None

    def probe():
        got = {n: value(f"shardtrain_launcher_{n}") for n in
               ("restarts", "world_size", "running", "last_exit_status", "last_verdict")}
        if any(v is None for v in got.values()):
            return None
        number = {n: float(v["value"][1]) for n, v in got.items()}
        if (number["restarts"], number["world_size"], number["running"]) != (restarts, world, 1):
            return None
        return got
    got = wait_for(f"the launcher's series of {run} in Prometheus ({restarts} restarts, {world} ranks, running)",
                   seconds, probe)
    verdict = got["last_verdict"]["metric"]
    expect(verdict.get("verdict_class") == verdict_class and verdict.get("culprit_rank") == culprit_rank
           and verdict.get("culprit_host") == host,
           f"the last verdict's labels {verdict}, expected {verdict_class} rank {culprit_rank} host {host}")
    status = float(got["last_exit_status"]["value"][1])
    expect(status != 0, "the failed attempt's exit status is 0 in Prometheus")
    print(f"  Prometheus: launcher of {run} on {host}: {restarts} restart(s), {world} ranks, last exit status "
          f"{status:g}, last verdict {verdict_class} rank {culprit_rank} host {host} (attempt {verdict.get('attempt')})")


def alert_matches(alert, name, labels):
    return alert["labels"].get("alertname") == name and all(alert["labels"].get(k) == v for k, v in labels.items())


def prometheus_alerts(prometheus, name, labels, states):
    """The alerts named `name` with `labels` in one of `states` ("pending", "firing") in Prometheus."""
    return [a for a in http_json(f"{prometheus}/api/v1/alerts")["data"]["alerts"]
            if a["state"] in states and alert_matches(a, name, labels)]


def alerts_of(prometheus, alertmanager, name, labels):
    """The alerts named `name` with `labels` firing in Prometheus, and those Alertmanager received."""
    am = [a for a in http_json(f"{alertmanager}/api/v2/alerts") if alert_matches(a, name, labels)]
    return prometheus_alerts(prometheus, name, labels, ("firing",)), am


@command(("prometheus", str), ("alertmanager", str), ("name", str), ("labels", str), ("seconds", int))
def alert_fires(prometheus, alertmanager, name, labels, seconds):
    """The alert NAME with LABELS (JSON object) is firing in Prometheus and received by
    Alertmanager within SECONDS; prints its labels and summary."""
    want = json.loads(labels)
    prom, am = wait_for(f"{name} {want} firing and in Alertmanager", seconds,
                        lambda: (lambda p, a: (p, a) if p and a else None)(*alerts_of(prometheus, alertmanager, name, want)))
    print(f"  {name} firing in Prometheus and received by Alertmanager: {am[0]['annotations'].get('summary')}")
    print(f"  labels {json.dumps({k: v for k, v in am[0]['labels'].items() if k not in ('data_snapshot', 'code_version')})}")


@command(("prometheus", str), ("name", str), ("labels", str), ("seconds", int))
def alert_pending(prometheus, name, labels, seconds):
    """The alert NAME with LABELS (JSON object, run_dir among them) is pending or firing in
    Prometheus within SECONDS (for an alert whose `for:` is longer than a test waits), and no other
    alert NAME of that run_dir is; prints its summary."""
    want = json.loads(labels)
    states = ("pending", "firing")
    mine = wait_for(f"{name} {want} pending in Prometheus", seconds,
                    lambda: prometheus_alerts(prometheus, name, want, states) or None)
    print(f"  {name} {mine[0]['state']} in Prometheus: {mine[0]['annotations'].get('summary')}")
    others = [a["labels"] for a in prometheus_alerts(prometheus, name, {"run_dir": want["run_dir"]}, states)
              if not alert_matches(a, name, want)]
    expect(not others, f"other {name} alerts of the run: {others}")


@command(("prometheus", str), ("alertmanager", str), ("run", str))
def no_alerts(prometheus, alertmanager, run):
    """No alert of the run (its run_dir label) is pending or firing in Prometheus, and none is in
    Alertmanager."""
    run = os.path.realpath(run)
    prom = [a for a in http_json(f"{prometheus}/api/v1/alerts")["data"]["alerts"] if a["labels"].get("run_dir") == run]
    am = [a for a in http_json(f"{alertmanager}/api/v2/alerts") if a["labels"].get("run_dir") == run]
    expect(not prom and not am, f"alerts of {run}: Prometheus {prom}, Alertmanager {am}")
    print(f"  no alert of {run} in Prometheus or Alertmanager")


if __name__ == "__main__":
    sys.exit(checks.main(sys.argv[1:]))
