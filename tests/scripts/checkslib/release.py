"""release-gate: its corpora and policies, and its records, utility and registry checked by hand."""
import datetime
import hashlib
import json
import os
import random

from .common import command, expect, load, load_lines, save


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
