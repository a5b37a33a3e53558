"""Checkpoints: corruption, save stalls, resharded manifests, equiv-check of two checkpoints."""
from .common import Unusable, command, expect, load, load_lines


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
