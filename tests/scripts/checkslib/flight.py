"""Flight records and hang-diagnose: what the dumps and the diagnosis of a faulty job must say,
and the synthetic records hang-diagnose's command line is tested on."""
import glob

from .common import command, expect, flight_records, group_of, load, save


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
