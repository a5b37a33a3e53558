#!/usr/bin/env bash
# scale-bench run + report end to end: a small model at W = 1, 2 and 4 (weak scaling; W = 4 is
# oversubscribed on a 2-core machine and must be marked so), then the report's files: report.json
# and report.md with the E formula line (its numbers checked against report.json), the
# oversubscribed mark, the step-log recomputation; the SVG plots parse as XML and show every
# point (one marker and one label per W; one bar label per rank and W). Bad inputs exit 2: a
# folder without summary.json, runs of different models, --workers 0 or malformed.
#
# Usage: scale_report.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
SB="$BIN_DIR/scale-bench"
args=(--data "$DATA" --seq-len 64 --layers 2 --heads 2 --d-model 64 --peak-gflops 100 --steps 12
      --micro-batch 4 --global-batch 4 --log-every 1000)

out="$WORK/series"
"$SB" run --workers 1,2,4 --out "$out" -- "${args[@]}" >"$WORK/run.log" 2>&1 ||
  { cat "$WORK/run.log" >&2; fail "scale-bench run failed"; }
sed 's/^/  /' "$WORK/run.log"
for f in report.json report.md efficiency.svg speedup.svg breakdown.svg w1/summary.json w2/summary.json w4/summary.json; do
  [ -s "$out/$f" ] || fail "no $out/$f"
done
pass "scale-bench run wrote three run folders, report.json, report.md and three SVGs"

# report.json: weak mode, the batches scaled, the oversubscribed marks against this host's CPUs,
# the recomputation present; report.md: the formula line with the numbers of report.json.
python3 - "$out" <<'PY' || fail "report.json / report.md checks"
import json, os, re, sys
d = sys.argv[1]
r = json.load(open(f"{d}/report.json"))
md = open(f"{d}/report.md").read()
pts = {p["world_size"]: p for p in r["points"]}
assert sorted(pts) == [1, 2, 4], sorted(pts)
assert r["mode"] == "weak", r["mode"]
assert [pts[w]["global_batch"] for w in (1, 2, 4)] == [4, 8, 16], "weak scaling multiplies --global-batch by W"
cpus = json.load(open(f"{d}/w1/summary.json"))["host"]["cpus"]
assert cpus == os.cpu_count(), (cpus, os.cpu_count())
for w, p in pts.items():
    assert p["oversubscribed"] == (w > cpus), (w, cpus, p["oversubscribed"])
    assert p["recomputed"] and p["recomputed"]["throughput_tokens_per_s"] > 0, f"W={w}: no recomputation"
    assert len(p["ranks"]) == w and p["actions"], f"W={w}: ranks or actions missing"
    row = [l for l in md.splitlines() if l.startswith(f"| {w} | ")][0]
    assert ("**oversubscribed**" in row) == (w > cpus), row
    print(f"  W={w}: {p['throughput_tokens_per_s']:.0f} tokens/s, E {p['efficiency']:.3f}, from logs "
          f"{p['recomputed']['efficiency']:.3f}, within tolerance {p['within_tolerance']}, "
          f"oversubscribed {p['oversubscribed']}, slowest rank {p['slowest_rank']} ({p['slowest_section']})")
assert pts[1]["within_tolerance"], "W=1: the summary and its own step logs disagree"
if cpus < 4:
    assert pts[4]["oversubscribed"] and any("oversubscribed" in a for a in pts[4]["actions"])
m = re.search(r"E\((\d+)\) = ([\d,]+) / \((\d+) x ([\d,]+)\) = (\d\.\d{3})", md)
assert m, "no formula line in report.md"
w = int(m.group(1))
t_w, t_1 = float(m.group(2).replace(",", "")), float(m.group(4).replace(",", ""))
assert int(m.group(3)) == w and w in pts and w > 1
assert abs(t_w - pts[w]["throughput_tokens_per_s"]) <= 0.5 and abs(t_1 - pts[1]["throughput_tokens_per_s"]) <= 0.5
assert abs(float(m.group(5)) - pts[w]["efficiency"]) <= 0.0005, "the formula's E is not the report's"
assert not (pts[w]["oversubscribed"] and not all(pts[x]["oversubscribed"] for x in pts if x > 1)), "formula quotes an oversubscribed point"
print(f"  formula: {m.group(0)}")
PY
pass "report.json and report.md: weak scaling, oversubscribed marked, formula matches, recomputation present"

# The plots: XML, one marker and one label per W (measured and oversubscribed series each add one
# marker in the key), every (W, rank) bar labelled.
python3 - "$out" <<'PY' || fail "SVG checks"
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
def texts(root): return [("".join(t.itertext())).strip() for t in root.iter() if t.tag.endswith("text")]
for name in ("efficiency", "speedup"):
    root = ET.parse(f"{d}/{name}.svg").getroot()
    rows = [l.split() for l in open(f"{d}/{name}.dat") if not l.startswith("#")]
    # Placed markers: <use href="#gpPtN" transform="translate(x,y) ..."> (the <defs> hold the shapes).
    markers = [e for e in root.iter() if e.tag.endswith("use") and "gpPt" in str(e.attrib)
               and "translate(" in e.attrib.get("transform", "")]
    labels = [t for t in texts(root) if t.startswith("W=")]
    print(f"  {name}.svg: {len(rows)} data rows, {len(markers)} markers (with 2 in the key), labels {labels}")
    assert len(rows) == 3, rows
    # The key holds one marker per series: measured, and oversubscribed only where a point is.
    over = any(row[2] == "1" for row in rows)
    assert len(markers) == len(rows) + 1 + over, f"{name}: {len(markers)} markers for {len(rows)} points"
    assert ("oversubscribed" in open(f"{d}/{name}.gp").read()) == over, f"{name}: oversubscribed series in the key"
    want = ["W=1", "W=2", "W=4 oversubscribed" if rows[2][2] == "1" else "W=4"]
    assert sorted(labels) == sorted(want), (labels, want)
# The breakdown: one bar per (W, rank) labelled r<rank> under it, grouped by W, the group's name
# ("W=4", "W=4 oversubscribed") under its bars.
root = ET.parse(f"{d}/breakdown.svg").getroot()
bars = [l for l in open(f"{d}/breakdown.dat") if l.strip() and not l.startswith("#")]
groups = [t for t in texts(root) if t.startswith("W=")]
ranks = [t for t in texts(root) if t.startswith("r") and t[1:].isdigit()]
print(f"  breakdown.svg: {len(bars)} bars, rank labels {ranks}, group labels {groups}")
assert len(bars) == 1 + 2 + 4, bars
assert sorted(ranks) == sorted(["r0", "r0", "r1", "r0", "r1", "r2", "r3"]), ranks
over4 = json.load(open(f"{d}/report.json"))["points"][2]["oversubscribed"]
assert sorted(groups) == ["W=1", "W=2", "W=4 oversubscribed" if over4 else "W=4"], groups
PY
pass "SVGs parse and show every point and every rank's bar"

# Without an oversubscribed point (W = 1 and 2 on a host of >= 2 CPUs) no plot names the series.
cpus=$(python3 -c "import json; print(json.load(open('$out/w1/summary.json'))['host']['cpus'])")
if [ "$cpus" -ge 2 ]; then
  "$SB" report --out "$WORK/w12" "$out/w1" "$out/w2" >/dev/null
  for f in efficiency speedup breakdown; do
    ! grep -q "oversub" "$WORK/w12/$f.gp" || fail "$f.gp names an oversubscribed series without an oversubscribed point"
    ! grep -q "oversub" "$WORK/w12/$f.svg" || fail "$f.svg mentions oversubscription without an oversubscribed point"
  done
  pass "W=1,2 on $cpus CPUs: no plot mentions oversubscription"
fi

# Bad inputs: exit 2 and a line naming the culprit.
expect_usage() { local want=$1; shift; expect_exit2 "$want" "$SB" "$@"; }
mkdir -p "$WORK/empty"
expect_usage "$WORK/empty" report --out "$WORK/bad" "$out/w1" "$WORK/empty"
mkdir -p "$WORK/other"
# The same options but one layer more: another model (and config hash).
other=("${args[@]}")
other[5]=3  # --layers 2 -> 3
[ "${other[4]}" = --layers ] || fail "the test's own argument list changed"
mpirun -np 1 "$BIN_DIR/ddp-train" "${other[@]}" --run-dir "$WORK/other/big" >"$WORK/other.log" 2>&1 ||
  { cat "$WORK/other.log" >&2; fail "the other model's run"; }
expect_usage "$out/w1 and $WORK/other/big are runs of different training problems (model differs" \
  report --out "$WORK/bad" "$out/w1" "$WORK/other/big"
expect_usage "two runs at W=1" report --out "$WORK/bad" "$out/w1" "$out/w1"
expect_usage "--workers 0" run --workers 0 --out "$WORK/bad" -- "${args[@]}"
expect_usage "--workers 1,,2" run --workers 1,,2 --out "$WORK/bad" -- "${args[@]}"
[ ! -e "$WORK/bad/report.json" ] || fail "a refused report wrote report.json"
pass "bad inputs exit 2 naming the folder or the option"

# --model: the model's E(W) beside every measured point, and its curve in the efficiency plot.
"$BIN_DIR/scale-bench" predict --example seed-lab --json >"$WORK/seed.json"
python3 -c "import json, sys; json.dump(json.load(open(sys.argv[1]))['model'], open(sys.argv[2], 'w'))" \
  "$WORK/seed.json" "$WORK/model.json"
"$BIN_DIR/scale-bench" report --out "$WORK/predicted" --model "$WORK/model.json" "$out/w1" "$out/w2" "$out/w4" >/dev/null
python3 - "$WORK/predicted" "$WORK/seed.json" <<'PY' || fail "the report does not show the model's prediction"
import json, sys
points = json.load(open(f"{sys.argv[1]}/report.json"))["points"]
seed = {row["workers"]: row["efficiency"] for row in json.load(open(sys.argv[2]))["rows"]}
for p in points:
    w = p["world_size"]
    print(f"  W={w}: measured E {p['efficiency']:.3f}, predicted {p['predicted_efficiency']:.3f} (model: {seed[w]:.3f})")
    assert abs(p["predicted_efficiency"] - seed[w]) < 1e-9, "the report's prediction is not the model's"
assert "model prediction" in open(f"{sys.argv[1]}/efficiency.gp").read(), "no prediction curve in the plot"
PY
pass "--model fills the predicted column and draws the model's curve"
