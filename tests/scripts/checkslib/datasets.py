"""Datasets and exports: corpora written for data-prep, Hugging Face and llm.c formats, hold-out
agreement."""
import hashlib
import json
import random
import struct

from .common import command, expect, load, save


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
