#!/usr/bin/env python3
"""Check a GPT-2 safetensors export of ckpt-reshard against shardtrain's own logits.

    /usr/bin/python3 tests/clients/check-gpt2-export.py EXPORT_DIR LOGITS.safetensors [--bf16-of FP32_DIR]

EXPORT_DIR holds model.safetensors and config.json (ckpt-reshard --export safetensors --out
EXPORT_DIR/model.safetensors); LOGITS.safetensors holds `tokens` (B, T+1) and `logits` (B, T, V)
that shardtrain's decoder computed from the same checkpoint (tests/model_logits_helper.cpp).

Independent of shardtrain's code: the safetensors file is parsed here (8-byte little-endian header
length, JSON header, raw data), and GPT-2 is written here from its definition, reading only the
Hugging Face names and config.json:
    x = wte[idx] + wpe[0:T]
    per layer: a = ln_1(x); qkv = a @ c_attn.weight + c_attn.bias   (Conv1D: (in, out) weights)
               heads split q|k|v then n_head blocks; causal softmax(q k^T / sqrt(hs)) v
               x += merge(y) @ attn.c_proj.weight + bias
               x += gelu_new(ln_2(x) @ c_fc.weight + b) @ mlp.c_proj.weight + b
    logits = ln_f(x) @ wte^T  (tied lm_head); layer_norm_epsilon and activation from config.json
Computed in float64 with NumPy (python3-numpy) and, when PyTorch is importable, ALSO by a plain
torch.nn GPT-2 module in float32 loaded from the same tensors (transformers is not used: Debian 12
does not package it).

Tolerances: fp32 export: max |ours - reference| / max |reference| <= 1e-5 (the float64 reference
differs from shardtrain's float32 forward by <= 3.3e-7 in tests/test_model_reference.cpp; 1e-5 is
the issue's bound with 30x room). bf16 export (--bf16-of FP32_DIR): every bf16 weight must equal the
round-to-nearest-even bf16 value of the fp32 export's weight, decided here in float64 from the two
neighbouring bf16 values (so each weight is within 2^-8 relative: half a unit in the last of bf16's 8
significant bits), and the logits of the bf16 model within 2e-2 norm-relative of shardtrain's fp32
logits (each weight perturbed by up to 2^-8 = 0.39%; through the layers the logits moved 1.9e-3 on
the test's 2-layer model: the bound leaves 10x room, and a wrong name or transpose gives O(1)).
Exit 0 when every check passes, 1 otherwise.
"""
import json
import math
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    out, meta, end = {}, header.pop("__metadata__", {}), 0
    spans = []
    for name, h in header.items():
        b, e = h["data_offsets"]
        spans.append((b, e, name))
        raw = bytes(data[b:e])
        if h["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif h["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32).astype(np.float64)
        else:
            raise SystemExit(f"{path}: unexpected dtype {h['dtype']} for {name}")
        out[name] = arr.reshape(h["shape"])
        end = max(end, e)
    spans.sort()
    pos = 0
    for b, e, name in spans:  # the format: packed, no gaps or overlaps, covering the data section
        assert b == pos, f"{path}: {name} starts at {b}, expected {pos}"
        pos = e
    assert pos == len(data), f"{path}: data section is {len(data)} bytes, tensors cover {pos}"
    assert (8 + n) % 8 == 0, f"{path}: header not padded to 8 bytes"
    return out, meta


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gpt2_numpy(W, cfg, idx):
    B, T = idx.shape
    C, NH, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    assert cfg["activation_function"] == "gelu_new"
    hs = C // NH
    x = W["transformer.wte.weight"][idx] + W["transformer.wpe.weight"][:T]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        a = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = a @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = np.split(qkv, 3, axis=-1)
        q, k, v = (t.reshape(B, T, NH, hs).transpose(0, 2, 1, 3) for t in (q, k, v))
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
        att = np.where(mask, -np.inf, att)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        m = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        x = x + gelu_new(m @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"]) @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    x = layer_norm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    return x @ W["transformer.wte.weight"].T


def gpt2_torch(W, cfg, idx):
    """A plain torch.nn GPT-2 (float32) whose parameters are loaded from the HF-named tensors."""
    import torch
    from torch import nn

    C, NH, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]

    class Conv1D(nn.Module):  # GPT-2's linear layer: weight (in, out)
        def __init__(self, nin, nout):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(nin, nout))
            self.bias = nn.Parameter(torch.empty(nout))

        def forward(self, x):
            return x @ self.weight + self.bias

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C, eps=cfg["layer_norm_epsilon"])
            self.attn = nn.Module()
            self.attn.c_attn, self.attn.c_proj = Conv1D(C, 3 * C), Conv1D(C, C)
            self.ln_2 = nn.LayerNorm(C, eps=cfg["layer_norm_epsilon"])
            self.mlp = nn.Module()
            self.mlp.c_fc, self.mlp.c_proj = Conv1D(C, 4 * C), Conv1D(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
            att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
            x = x + self.attn.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))
            return x + self.mlp.c_proj(nn.functional.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.Module()
            self.transformer.wte = nn.Embedding(cfg["vocab_size"], C)
            self.transformer.wpe = nn.Embedding(cfg["n_positions"], C)
            self.transformer.h = nn.ModuleList(Block() for _ in range(L))
            self.transformer.ln_f = nn.LayerNorm(C, eps=cfg["layer_norm_epsilon"])

        def forward(self, idx):
            t = self.transformer
            x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1]))
            for block in t.h:
                x = block(x)
            return t.ln_f(x) @ t.wte.weight.T  # tied lm_head

    model = GPT2()
    state = {k: torch.tensor(v, dtype=torch.float32) for k, v in W.items()}
    model.load_state_dict(state, strict=True)
    with torch.no_grad():
        return model(torch.tensor(idx, dtype=torch.long)).double().numpy()


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def rne_bf16_reference(w32):
    """bf16 value nearest to each float32 (ties to even), decided in float64 from the two bf16 neighbours."""
    bits = np.asarray(w32, dtype=np.float32).reshape(-1).view(np.uint32)
    lo_bits = bits & np.uint32(0xFFFF0000)
    hi_bits = lo_bits + np.uint32(0x10000)
    lo = lo_bits.view(np.float32).astype(np.float64)
    hi = hi_bits.view(np.float32).astype(np.float64)
    x = bits.view(np.float32).astype(np.float64)
    dlo, dhi = np.abs(x - lo), np.abs(hi - x)
    lo_even = ((lo_bits >> 16) & 1) == 0
    pick_hi = (dhi < dlo) | ((dhi == dlo) & ~lo_even)
    return np.where(pick_hi, hi, lo).reshape(np.shape(w32))


def main():
    args = sys.argv[1:]
    bf16_of = None
    if "--bf16-of" in args:
        i = args.index("--bf16-of")
        bf16_of = args[i + 1]
        del args[i:i + 2]
    export_dir, logits_path = args
    cfg = json.load(open(f"{export_dir}/config.json"))
    W, meta = read_safetensors(f"{export_dir}/model.safetensors")
    ref, _ = read_safetensors(logits_path)
    idx = ref["tokens"].astype(np.int64)[:, :-1]
    ours = ref["logits"]
    expected = 4 + 12 * cfg["n_layer"]
    assert len(W) == expected, f"{len(W)} tensors, a GPT-2 of {cfg['n_layer']} layers has {expected} (lm_head tied)"
    assert "lm_head.weight" not in W
    assert W["transformer.h.0.attn.c_attn.weight"].shape == (cfg["n_embd"], 3 * cfg["n_embd"]), "c_attn not in Conv1D layout"
    ok = True
    logits = gpt2_numpy(W, cfg, idx)
    err = rel(ours, logits)
    if bf16_of is None:
        print(f"  fp32 export: numpy float64 GPT-2 vs shardtrain logits: max rel error {err:.3g} (bound 1e-5)")
        ok &= err <= 1e-5
        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            have_torch = False
            print("  (PyTorch not importable here: the torch.nn GPT-2 check is skipped; the numpy one ran)")
        if have_torch:
            terr = rel(ours, gpt2_torch(W, cfg, idx))
            print(f"  fp32 export: torch.nn GPT-2 (float32) vs shardtrain logits: max rel error {terr:.3g} (bound 1e-5)")
            ok &= terr <= 1e-5
    else:
        W32, _ = read_safetensors(f"{bf16_of}/model.safetensors")
        worst = 0.0
        for name, w in W.items():
            want = rne_bf16_reference(W32[name])
            if not np.array_equal(w, want):
                print(f"  {name}: bf16 values differ from round-to-nearest-even of the fp32 export")
                ok = False
            nz = W32[name] != 0
            if nz.any():
                worst = max(worst, float((np.abs(w - W32[name])[nz] / np.abs(W32[name])[nz]).max()))
        print(f"  bf16 export: every weight is RNE(fp32 weight); worst relative rounding {worst:.3g} (bound 2^-8 = {2**-8:.3g})")
        ok &= worst <= 2 ** -8
        print(f"  bf16 export: GPT-2 logits vs shardtrain's fp32 logits: max rel error {err:.3g} (bound 2e-2)")
        ok &= err <= 2e-2
    print("  metadata:", {k: meta[k] for k in sorted(meta) if k != "source"})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
