"""Slurm: the chain's corpus and release; free loopback ports (the test cluster's daemons, a
metrics endpoint's ranks)."""
import datetime
import glob
import json
import os
import random
import socket

from .common import Unusable, command, expect, load


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
