"""scale-bench: the scaling report, its plots and the model's prediction."""
import os
import re
import xml.etree.ElementTree as ET

from .common import command, expect, load, read_text


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
