#!/usr/bin/env python3
"""The figures the benchmark scripts (scripts/bench-*.sh) and the demo (scripts/demo.sh) print.

Usage: python3 scripts/lib/figures.py NAME ARGS...    (--help lists the names)

Each NAME is the closing computation of one script: it reads the rows the script collected (one
round per line, the script's own columns) or the files the tools wrote, and prints the medians,
ratios and verdict lines that docs/PERFORMANCE.md quotes. A benchmark that checks what it measured
(bench-verdict.sh) exits 1 with one line saying what was wrong; unreadable input exits 2. Nothing
here measures: the scripts run the jobs, so the figures can be recomputed from saved rows.
"""
import os
import re
import statistics as st
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from subcommands import Failed, Registry, load, load_lines, read_text  # noqa: E402

figures = Registry("figures.py", __doc__.split("\n")[0])
command = figures.command


def rows_of(path, sep=None):
    """The rows of a script's table file: one list of fields per non-empty line."""
    return [line.split(sep) for line in read_text(path).splitlines() if line.strip()]


def median_col(rows, i):
    """The median of column i (a number in every row)."""
    return st.median(float(r[i]) for r in rows)


@command(("rows", str))
def agreement(rows):
    """bench-agreement.sh: rows "round big_on big_off tiny_on tiny_off" (ms); the medians and
    the agreement's cost, on / off - 1, per configuration."""
    rows = [r[1:] for r in rows_of(rows)]
    m = [median_col(rows, i) for i in range(4)]
    print(f"median over {len(rows)} rounds: foundation W=2 fast {m[0]:.3f} vs {m[1]:.3f} ms: cost {100 * (m[0] / m[1] - 1):+.2f}% of a step; "
          f"tiny W=4 deterministic {m[2]:.3f} vs {m[3]:.3f} ms: cost {100 * (m[2] / m[3] - 1):+.2f}%")


@command(("rows", str))
def ddp(rows):
    """bench-ddp.sh: the printed rows; medians of E(2), the co-run ceiling, their ratio, the peer's E(2)."""
    rows = rows_of(rows)
    print(f"median over {len(rows)} rounds: E(2) {median_col(rows, 3):.3f}, co-run ceiling {median_col(rows, 4):.3f}, "
          f"E(2)/ceiling {median_col(rows, 5):.3f}, peer E(2) {median_col(rows, 14):.3f}")


@command(("rows", str))
def deterministic(rows):
    """bench-deterministic.sh: the printed rows; the median deterministic / fast ratio against 1.10
    (issue 47; 1.15 before), and with a previous build's columns (its median step, this build's / its)
    the previous build's deterministic / fast and this build's / the previous build's."""
    rows = rows_of(rows)
    ratio = median_col(rows, 3)
    print(f"median over {len(rows)} rounds: deterministic / fast = {ratio:.3f} (target <= 1.10): "
          + ("MET" if ratio <= 1.10 else "NOT MET"))
    if rows and len(rows[0]) > 9:
        previous = st.median(float(r[8]) / float(r[1]) for r in rows)
        print(f"previous build's deterministic / fast = {previous:.3f}, "
              f"this build's / previous build's = {median_col(rows, 9):.3f}")


@command(("rows", str))
def tp(rows):
    """bench-tp.sh part 1: the printed rows; the median (DP=1,TP=2) / (DP=2,TP=1) throughput ratio."""
    rows = rows_of(rows)
    print(f"median over {len(rows)} rounds: (DP=1,TP=2) / (DP=2,TP=1) = {median_col(rows, 3):.3f}")


@command(("rows", str), ("per_call", str))
def recorder(rows, per_call):
    """bench-recorder.sh: rows "name round entries median_step_s collectives_per_step grad_accum"
    (tab-separated; entries 2048 = recorder on, 0 = off) and the per-call costs of
    recorder_bench.cpp; per configuration the modelled per-call share of a step and the end-to-end
    on / off medians and pair ratios."""
    rows = rows_of(rows, "\t")
    costs = dict(line.split() for line in read_text(per_call).splitlines() if line.strip())
    ns_collective = float(costs["recorder_ns_per_collective"])
    ns_phase = float(costs["phase_ns_per_change_on"]) - float(costs["phase_ns_per_change_off"])
    print(f"# per call: {ns_collective:.0f} ns a recorded collective, {ns_phase:.0f} ns a phase change (history on - off)")
    print("# configuration: step, collectives and phase changes per step, per-call cost share; "
          "end to end: median step on / off, median of pair ratios - 1")
    for name in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == name]
        on = [float(r[3]) for r in mine if r[2] == "2048"]
        off = [float(r[3]) for r in mine if r[2] == "0"]
        calls = st.median(float(r[4]) for r in mine if r[2] == "2048")
        phases = 3 + 2 * int(mine[0][5])  # data, (forward, backward) x grad_accum, optimizer, step-end
        step = st.median(on)
        modelled = (calls * ns_collective + phases * ns_phase) * 1e-9 / step
        ratios = [a / b for a, b in zip(on, off)]
        print(f"{name}: step {1e3 * step:.2f} ms, {calls:.1f} collectives + {phases} phase changes a step, "
              f"per-call cost {100 * modelled:.4f}% of the step; end to end on {1e3 * st.median(on):.2f} ms, "
              f"off {1e3 * st.median(off):.2f} ms, pair ratio {100 * (st.median(ratios) - 1):+.2f}% "
              f"(pairs {', '.join(f'{100 * (x - 1):+.1f}%' for x in ratios)})")


@command(("rows", str), ("per_call", str))
def metrics(rows, per_call):
    """bench-metrics.sh: rows "round mode median_step_s" (tab-separated; mode on = --metrics-port
    served and scraped every second and the TensorBoard events, off = neither) and the per-call
    costs of metrics_bench.cpp; the modelled share of a step (a step's publishing and its
    TensorBoard record, plus one scrape a second), the median step on and off and the median of the
    on / off pair ratios, against the 1% asked for."""
    rows = rows_of(rows, "\t")
    costs = dict(line.split() for line in read_text(per_call).splitlines() if line.strip())
    on = [float(r[2]) for r in rows if r[1] == "on"]
    off = [float(r[2]) for r in rows if r[1] == "off"]
    step = st.median(off)
    events = float(costs.get("tensorboard_ns_per_step", 0))
    modelled = (float(costs["metrics_ns_per_step"]) + events + float(costs["metrics_ns_per_scrape"]) * step) * 1e-9 / step
    print(f"# per call: {float(costs['metrics_ns_per_step']) / 1e3:.1f} us a step's publishing, "
          f"{events / 1e3:.1f} us a step's TensorBoard record, "
          f"{float(costs['metrics_ns_per_scrape']) / 1e3:.1f} us a scrape ({costs['metrics_series']} series); "
          f"modelled share of a {1e3 * step:.1f} ms step at one scrape a second: {100 * modelled:.4f}%")
    ratios = [a / b for a, b in zip(on, off)]
    cost = st.median(ratios) - 1
    print(f"end to end: median step on {1e3 * st.median(on):.2f} ms, off {1e3 * st.median(off):.2f} ms; median pair ratio "
          f"{100 * cost:+.2f}% (pairs {', '.join(f'{100 * (x - 1):+.1f}%' for x in ratios)}): "
          + ("within 1%" if abs(cost) <= 0.01 else "NOT within 1%"))


@command(("summary", str), ("evaluation", str))
def release_gate(summary, evaluation):
    """bench-release-gate.sh: the training's time and throughput, release-gate eval's time as a
    share of it (goal: under 10%), its token rates and latency."""
    s, e = load(summary), load(evaluation)
    t, v = s["train_seconds"], e["seconds"]
    lat = e["latency"]
    print(f"  training: {s['steps']} steps in {t:.1f} s ({s['throughput_tokens_per_s']:.0f} tokens/s, "
          f"matmul peak {s['peak_flops_per_rank'] / 1e9:.1f} GFLOP/s)")
    print(f"  eval:     {e['scores']['tokens']:.0f} hold-out tokens ({e['holdout']['samples']} sequences) in {v:.2f} s = "
          f"{100 * v / t:.1f}% of the training time; {e['evaluated_tokens_per_s']:.0f} evaluated tokens/s, "
          f"forward {lat['forward_tokens_per_s']:.0f} tokens/s, {lat['ms_per_sequence_p50']:.1f} / "
          f"{lat['ms_per_sequence_p99']:.1f} ms per sequence p50 / p99 at batch {lat['batch']}")
    print(f"  verdict: {'under' if v < 0.1 * t else 'OVER'} 10% of the training time")


@command(("params", int), ("src_bytes", int), ("processes", str), ("rows", str, "+"))
def reshard(params, src_bytes, processes, rows):
    """bench-reshard.sh: rows "dd_seconds reshard_seconds reshard_bytes"; per round both
    bandwidths and their ratio, then the medians' ratio against the 70% target."""
    rows = [tuple(float(x) for x in r.split()) for r in rows]
    print(f"# ckpt-reshard vs dd+fdatasync: {params / 1e6:.1f}M parameters ({src_bytes / 1e9:.2f} GB with moments), "
          f"W=2 ZeRO-3 -> W=3 ZeRO-1, {processes} writing process(es), {len(rows)} alternating rounds")
    print(f"# {'round':>5} {'dd bytes':>12} {'dd s':>7} {'dd GB/s':>8} {'reshard bytes':>14} {'reshard s':>10} {'GB/s':>7} {'ratio':>6}")
    dd, rs = [], []
    for i, (d, r, out) in enumerate(rows, 1):
        dd.append(src_bytes / d / 1e9)
        rs.append(out / r / 1e9)
        print(f"  {i:>5} {src_bytes:>12} {d:>7.2f} {dd[-1]:>8.3f} {int(out):>14} {r:>10.2f} {rs[-1]:>7.3f} {100 * rs[-1] / dd[-1]:>5.0f}%")
    mdd, mrs = st.median(dd), st.median(rs)
    print(f"verdict: ckpt-reshard (whole command) median {mrs:.3f} GB/s = {100 * mrs / mdd:.0f}% of dd+fdatasync median "
          f"{mdd:.3f} GB/s; target >= 70%")


@command(("restarts", str), ("step_log", str), ("world", int))
def restart_row(restarts, step_log, world):
    """bench-restart-elastic.sh, one run: "restart_s first_step_s old_W new_W" of its one
    restart (the first resumed step found in rank 0's step log by its time)."""
    r = load(restarts)["restarts"]
    if not (len(r) == 1 and r[0]["restart_s"] is not None):
        raise Failed(f"{restarts}: expected one measured restart, found {r}")
    r = r[0]
    first = next(s for s in load_lines(step_log) if s["time"] == r["first_resumed_step_time"])
    print(r["restart_s"], first["step_s"], r.get("previous_world_size", world), r.get("world_size", world))


@command(("world", str), ("seq", str), ("global_batch", str), ("rows", str, "+"))
def restart_elastic(world, seq, global_batch, rows):
    """bench-restart-elastic.sh: rows "mode restart_s first_step_s old_W new_W" (mode same or
    lost); per run restart_s, first step and "to ready" (the difference), then lost / same
    medians of both against the 1.10x target."""
    rows = [r.split() for r in rows]
    print(f"# lost-node vs same-W restart: ddp-train, 85M parameters (1.03 GB state), seq {seq}, global batch {global_batch}, "
          f"{world} ranks, rank 1 SIGKILLed after step 2; {len(rows) // 2} alternating rounds")
    print(f"# {'mode':>9} {'W':>7} {'restart_s':>9} {'first step':>10} {'to ready':>8}")
    by = {"same": ([], []), "lost": ([], [])}
    for mode, restart, step, old, new in rows:
        restart, step = float(restart), float(step)
        by[mode][0].append(restart)
        by[mode][1].append(restart - step)
        print(f"  {mode:>9} {old + '->' + new:>7} {restart:>9.2f} {step:>10.2f} {restart - step:>8.2f}")
    for k, name in ((0, "restart_s (relaunch -> first resumed step)"), (1, "to ready (restart_s - first step)")):
        s, lost = st.median(by["same"][k]), st.median(by["lost"][k])
        print(f"verdict: {name}: lost node median {lost:.2f} s vs same-W {s:.2f} s = {lost / s:.2f}x; target <= 1.10x")


@command(("step_log", str), ("restarts", str))
def restart(step_log, restarts):
    """bench-restart.sh: rank 0's training stall per save (ckpt_s) and each restart's time."""
    saves = [r for r in load_lines(step_log) if r["ckpt_s"] > 0]
    print("  training stall per save (ckpt_s, rank 0): " + ", ".join(f"step {r['step'] + 1}: {r['ckpt_s']:.3f} s" for r in saves))
    for r in load(restarts)["restarts"]:
        print(f"  restart {r['attempt']}: rank {r['failed_rank']} killed, resumed from {r['resumed_from']}, "
              f"restart time {r['restart_s']:.2f} s (relaunch -> first resumed step)")


@command(("lines", str), ("rounds", int))
def verdict(lines, rounds):
    """bench-verdict.sh: the launcher's verdict lines; the median "diagnosed in X s"; fails unless
    there is one line per round and each names rank 3, skipped-collective."""
    got = read_text(lines).splitlines()
    seconds = [float(m.group(1)) for m in (re.search(r"diagnosed in ([0-9.]+) s", line) for line in got) if m]
    bad = [line for line in got if "skipped-collective rank 3 " not in line]
    if seconds:
        print(f"timeout to verdict, W=4: median {st.median(seconds):.2f} s over {len(seconds)} rounds "
              f"(min {min(seconds):.2f}, max {max(seconds):.2f})")
    if len(got) != rounds or len(seconds) != len(got) or bad:
        raise Failed(f"{len(got)} verdicts for {rounds} rounds, {len(seconds)} with a time; wrong: {bad}")


@command(("demo", str))
def demo_report(demo):
    """scripts/demo.sh step 3: both runs' throughput, MFU, E(2), exposed communication and
    hold-out loss, and each restart from restarts.json."""
    one, two = load(f"{demo}/one/summary.json"), load(f"{demo}/two/summary.json")
    print(f"  1 rank : {one['throughput_tokens_per_s']:8.0f} tokens/s, MFU {100 * one['mfu']:.1f}%, "
          f"hold-out loss {one['eval']['holdout_loss']:.3f} nats/token after {one['steps']} steps")
    print(f"  2 ranks: {two['throughput_tokens_per_s']:8.0f} tokens/s, scaling efficiency E(2) = "
          f"{two['scaling_efficiency']:.3f}, exposed communication {100 * two['exposed_comm_fraction']:.2f}% of a step, "
          f"hold-out loss {two['eval']['holdout_loss']:.3f}")
    for r in load(f"{demo}/restarts.json")["restarts"]:
        rs = f"{r['restart_s']:.1f} s" if r["restart_s"] is not None else "n/a"
        print(f"  restart {r['attempt']}: rank {r['failed_rank']} died (exit {r['previous_exit_status']}), resumed from "
              f"{r['resumed_from']}, first resumed step {rs} after relaunch")


if __name__ == "__main__":
    sys.exit(figures.main(sys.argv[1:]))
