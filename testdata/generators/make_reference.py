#!/usr/bin/env python3
"""Write the float64 PyTorch reference files that shardtrain's C++ model/optimizer tests read.

Run (Debian: use the system interpreter, which is the one that has python3-torch/python3-h5py):

    /usr/bin/python3 testdata/generators/make_reference.py              # writes testdata/reference/{tiny,awkward}.h5
    /usr/bin/python3 testdata/generators/make_reference.py --out DIR    # writes DIR/{tiny,awkward}.h5

Needs: python3-torch, python3-h5py, python3-numpy (Debian packages; torch 1.13 is enough).

Model (the same GPT-2 style decoder as libcore's `model` module; written out here by hand, float64):
    x = wte[idx] + wpe[0:T]                                   # (B, T, C)
    for each layer l (pre-LayerNorm):
        a = ln_1(x); qkv = a @ qkv.weight^T + qkv.bias        # (B, T, 3C): q | k | v, each C wide
        head h uses columns h*hs .. (h+1)*hs of each third, hs = C / n_head
        y = softmax(causal_mask(q k^T / sqrt(hs))) v          # per head, concatenated back to (B, T, C)
        x = x + y @ attn.proj.weight^T + attn.proj.bias
        x = x + mlp.proj(gelu_tanh(mlp.fc(ln_2(x))))          # fc C->4C, proj 4C->C, both with bias
    logits = ln_f(x) @ wte^T                                  # tied LM head, (B, T, V)
    loss = mean cross-entropy over all B*T positions
    LayerNorm: (x - mean) / sqrt(biased_var + 1e-5) * weight + bias
    gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

Parameters (PyTorch Linear layout, weight is (out, in)), in this order:
    wte.weight (V,C), wpe.weight (T,C), then per layer l:
    h.{l}.ln_1.weight (C), h.{l}.ln_1.bias (C), h.{l}.attn.qkv.weight (3C,C), h.{l}.attn.qkv.bias (3C),
    h.{l}.attn.proj.weight (C,C), h.{l}.attn.proj.bias (C), h.{l}.ln_2.weight (C), h.{l}.ln_2.bias (C),
    h.{l}.mlp.fc.weight (4C,C), h.{l}.mlp.fc.bias (4C), h.{l}.mlp.proj.weight (C,4C), h.{l}.mlp.proj.bias (C),
    then ln_f.weight (C), ln_f.bias (C).

Initial weights: torch.Generator seeded with `seed`, tensors drawn in the order above with
torch.randn(float64): matrices, embeddings and all biases (LayerNorm biases included) 0.02*N(0,1);
LayerNorm weights 1 + 0.1*N(0,1). They are rounded to float32 and stored; the float64 computation
starts from exactly those float32 values. (The C++ tests read the weights from the file; they do
not reproduce this initialisation.) Tokens: a second generator seeded with seed+1,
torch.randint(0, vocab, (steps, batch, seq_len+1)); `tokens` is train/tokens[0], so `loss` equals
train/losses[0] and `grads/*` are the gradients of step 0.

Training: `steps` (=10) steps, batch s on step s (0-based). Each step: loss and gradients (autograd,
float64) at the current parameters; global gradient norm over all tensors
norm = sqrt(sum g^2); if norm > grad_clip, every gradient is multiplied by grad_clip/(norm + 1e-6);
then AdamW (PyTorch torch.optim.AdamW semantics, implemented by hand below), 1-based t = s+1:
    p -= lr*weight_decay*p        (only 2-D tensors: wte, wpe and the four Linear weights per layer)
    m  = beta1*m + (1-beta1)*g
    v  = beta2*v + (1-beta2)*g*g
    p -= lr * (m/(1-beta1^t)) / (sqrt(v/(1-beta2^t)) + eps)
LR for 0-based step s: s < warmup_steps: max_lr*(s+1)/warmup_steps; s >= decay_steps: min_lr;
else r = (s-warmup_steps)/(decay_steps-warmup_steps), lr = min_lr + 0.5*(1+cos(pi*r))*(max_lr-min_lr).

HDF5 layout of each file (no compression, no chunking):
    root attributes: vocab, seq_len, d_model, n_layer, n_head, batch, steps, warmup_steps,
        decay_steps, seed (int64 scalars); max_lr, min_lr, beta1, beta2, eps, weight_decay,
        grad_clip (float64 scalars); generator = "testdata/generators/make_reference.py", torch_version
        (fixed-length ASCII string scalars, H5T_STR_NULLPAD: no terminating NUL).
    weights/<name>        float32, logical shape    initial parameters
    tokens                int32 (batch, seq_len+1)  inputs = tokens[:, :-1], targets = tokens[:, 1:]
    logits                float32 (batch, seq_len, vocab)
    loss                  float64 scalar (shape ())
    grads/<name>          float32, logical shape    d(mean loss on `tokens`)/d(initial parameter)
    train/tokens          int32 (steps, batch, seq_len+1)
    train/losses          float64 (steps,)          loss of each step, before that step's update
    train/grad_norms      float64 (steps,)          pre-clip global gradient norm of each step
    train/lrs             float64 (steps,)          learning rate used at each step
    train/params/<name>   float32, logical shape    parameters after all `steps` updates

The script also repeats everything in float32 (same weights, same hand-written optimizer), once
through the hand-written forward and once through torch.nn.functional kernels (two float32
implementations that round differently), and prints the float32-vs-float64 max-norm relative
errors (max|a-b| / max|b| per tensor, worst tensor reported) against the C++ tests' tolerances
(logits, loss, losses 1e-5; grads, final params 1e-4); anything over them is listed at the end
under ATTENTION. Those numbers are what the tolerances are measured against. It also
cross-checks the hand-written forward against torch.nn.functional and the hand-written optimizer
against torch.optim.AdamW + clip_grad_norm_ (float64), and prints both differences.
"""
import argparse
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

CONFIGS = {
    "tiny": dict(vocab=64, seq_len=16, d_model=32, n_layer=2, n_head=4, batch=4, seed=1234),
    "awkward": dict(vocab=97, seq_len=17, d_model=60, n_layer=2, n_head=3, batch=3, seed=4321),
}
TRAIN = dict(steps=10, max_lr=1e-3, min_lr=1e-4, warmup_steps=3, decay_steps=10,
             beta1=0.9, beta2=0.95, eps=1e-6, weight_decay=0.1)
# eps = 1e-6, not the trainer's default 1e-8: with 1e-8 a handful of gradient elements of size
# ~1e-8 (about eps) make the first Adam update hypersensitive to float32 rounding of the gradient
# (measured: two correct float32 implementations differ by 1.6e-4 in max norm on `awkward`), so a
# final-parameter tolerance of 1e-4 would test rounding luck, not the optimizer. With 1e-6 two
# float32 implementations agree to <= 1.6e-5 on both configs. The formula under test is the same.
# Pre-clip norms are 0.90-1.17 (tiny) and 1.26-1.95 (awkward): at 1.0, tiny clips on steps 0-5 and
# not on 6-9 (both branches exercised), awkward clips on every step. build() warns if fewer than
# half of the steps clip.
GRAD_CLIP = {"tiny": 1.0, "awkward": 1.0}
LN_EPS = 1e-5


def param_specs(cfg):
    """(name, shape, kind) in canonical order; kind in {'matrix', 'bias', 'ln_w', 'ln_b'}."""
    V, T, C, L = cfg["vocab"], cfg["seq_len"], cfg["d_model"], cfg["n_layer"]
    specs = [("wte.weight", (V, C), "matrix"), ("wpe.weight", (T, C), "matrix")]
    for l in range(L):
        p = f"h.{l}."
        specs += [
            (p + "ln_1.weight", (C,), "ln_w"), (p + "ln_1.bias", (C,), "ln_b"),
            (p + "attn.qkv.weight", (3 * C, C), "matrix"), (p + "attn.qkv.bias", (3 * C,), "bias"),
            (p + "attn.proj.weight", (C, C), "matrix"), (p + "attn.proj.bias", (C,), "bias"),
            (p + "ln_2.weight", (C,), "ln_w"), (p + "ln_2.bias", (C,), "ln_b"),
            (p + "mlp.fc.weight", (4 * C, C), "matrix"), (p + "mlp.fc.bias", (4 * C,), "bias"),
            (p + "mlp.proj.weight", (C, 4 * C), "matrix"), (p + "mlp.proj.bias", (C,), "bias"),
        ]
    specs += [("ln_f.weight", (C,), "ln_w"), ("ln_f.bias", (C,), "ln_b")]
    return specs


def init_weights(cfg):
    """Initial parameters as float32 tensors (name -> tensor), drawn in canonical order."""
    g = torch.Generator().manual_seed(cfg["seed"])
    out = {}
    for name, shape, kind in param_specs(cfg):
        z = torch.randn(shape, generator=g, dtype=torch.float64)
        w = 1.0 + 0.1 * z if kind == "ln_w" else 0.02 * z
        out[name] = w.to(torch.float32)
    return out


def make_tokens(cfg, steps):
    g = torch.Generator().manual_seed(cfg["seed"] + 1)
    return torch.randint(0, cfg["vocab"], (steps, cfg["batch"], cfg["seq_len"] + 1),
                         generator=g, dtype=torch.int64)


# ---------------------------------------------------------------- model, written out by hand
def layer_norm(x, w, b):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)      # biased variance, as nn.LayerNorm
    return (x - mu) / torch.sqrt(var + LN_EPS) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def linear(x, w, b):
    return x @ w.t() + b


def forward(P, idx, tgt, cfg):
    """P: name -> tensor. idx, tgt: (B, T) int64. Returns (logits (B,T,V), mean loss)."""
    B, T = idx.shape
    C, H = cfg["d_model"], cfg["n_head"]
    hs = C // H
    x = P["wte.weight"][idx] + P["wpe.weight"][:T]                 # (B, T, C)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        a = layer_norm(x, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
        qkv = linear(a, P[p + "attn.qkv.weight"], P[p + "attn.qkv.bias"])   # (B, T, 3C)
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        q = q.reshape(B, T, H, hs).transpose(1, 2)                 # (B, H, T, hs)
        k = k.reshape(B, T, H, hs).transpose(1, 2)
        v = v.reshape(B, T, H, hs).transpose(1, 2)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(hs)              # (B, H, T, T)
        s = s.masked_fill(~causal, float("-inf"))
        s = s - s.max(dim=-1, keepdim=True).values
        e = torch.exp(s)
        att = e / e.sum(dim=-1, keepdim=True)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)             # (B, T, C)
        x = x + linear(y, P[p + "attn.proj.weight"], P[p + "attn.proj.bias"])
        a = layer_norm(x, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
        hdn = gelu_tanh(linear(a, P[p + "mlp.fc.weight"], P[p + "mlp.fc.bias"]))  # (B, T, 4C)
        x = x + linear(hdn, P[p + "mlp.proj.weight"], P[p + "mlp.proj.bias"])
    x = layer_norm(x, P["ln_f.weight"], P["ln_f.bias"])
    logits = x @ P["wte.weight"].t()                               # (B, T, V)
    z = logits - logits.max(dim=-1, keepdim=True).values
    logp = z - torch.log(torch.exp(z).sum(dim=-1, keepdim=True))
    loss = -logp.gather(-1, tgt.unsqueeze(-1)).mean()
    return logits, loss


def forward_functional(P, idx, tgt, cfg):
    """Same model through torch.nn.functional built-ins; only used to cross-check forward()."""
    B, T = idx.shape
    C, H = cfg["d_model"], cfg["n_head"]
    hs = C // H
    x = F.embedding(idx, P["wte.weight"]) + P["wpe.weight"][:T]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        a = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], LN_EPS)
        q, k, v = F.linear(a, P[p + "attn.qkv.weight"], P[p + "attn.qkv.bias"]).split(C, dim=2)
        q, k, v = (t.reshape(B, T, H, hs).transpose(1, 2) for t in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))).masked_fill(mask, float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, P[p + "attn.proj.weight"], P[p + "attn.proj.bias"])
        a = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], LN_EPS)
        hdn = F.gelu(F.linear(a, P[p + "mlp.fc.weight"], P[p + "mlp.fc.bias"]), approximate="tanh")
        x = x + F.linear(hdn, P[p + "mlp.proj.weight"], P[p + "mlp.proj.bias"])
    logits = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], LN_EPS) @ P["wte.weight"].t()
    return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))


# ---------------------------------------------------------------- optimizer, written out by hand
def lr_at(s, tr):
    if s < tr["warmup_steps"]:
        return tr["max_lr"] * (s + 1) / tr["warmup_steps"]
    if s >= tr["decay_steps"]:
        return tr["min_lr"]
    r = (s - tr["warmup_steps"]) / (tr["decay_steps"] - tr["warmup_steps"])
    return tr["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * r)) * (tr["max_lr"] - tr["min_lr"])


def loss_and_grads(P, toks, cfg, fwd=forward):
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in P.items()}
    logits, loss = fwd(leaves, toks[:, :-1], toks[:, 1:], cfg)
    loss.backward()
    return logits.detach(), loss.detach(), {n: t.grad.detach() for n, t in leaves.items()}


def train(P0, train_tokens, cfg, tr, clip, dtype, fwd=forward):
    """Hand-written clip + AdamW loop. Returns (final params, losses, pre-clip norms, lrs)."""
    P = {n: t.to(dtype).clone() for n, t in P0.items()}
    m = {n: torch.zeros_like(t) for n, t in P.items()}
    v = {n: torch.zeros_like(t) for n, t in P.items()}
    b1, b2, eps, wd = tr["beta1"], tr["beta2"], tr["eps"], tr["weight_decay"]
    losses, norms, lrs = [], [], []
    for s in range(tr["steps"]):
        _, loss, G = loss_and_grads(P, train_tokens[s], cfg, fwd)
        norm = torch.sqrt(sum((g * g).sum() for g in G.values())).item()
        if norm > clip:
            scale = clip / (norm + 1e-6)
            G = {n: g * scale for n, g in G.items()}
        lr, t = lr_at(s, tr), s + 1
        bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
        for n in P:
            p, g = P[n], G[n]
            if p.dim() == 2:
                p -= lr * wd * p
            m[n] = b1 * m[n] + (1.0 - b1) * g
            v[n] = b2 * v[n] + (1.0 - b2) * g * g
            p -= lr * (m[n] / bc1) / (torch.sqrt(v[n] / bc2) + eps)
        losses.append(loss.item()); norms.append(norm); lrs.append(lr)
    return P, losses, norms, lrs


def train_torch_optim(P0, train_tokens, cfg, tr, clip):
    """The same loop with torch.optim.AdamW and clip_grad_norm_ (float64): a cross-check only."""
    P = {n: t.to(torch.float64).clone().requires_grad_(True) for n, t in P0.items()}
    decay = [p for p in P.values() if p.dim() == 2]
    no_decay = [p for p in P.values() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tr["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=tr["max_lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"])
    for s in range(tr["steps"]):
        for grp in opt.param_groups:
            grp["lr"] = lr_at(s, tr)
        opt.zero_grad()
        toks = train_tokens[s]
        forward(P, toks[:, :-1], toks[:, 1:], cfg)[1].backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), clip)
        opt.step()
    return {n: t.detach() for n, t in P.items()}


# ---------------------------------------------------------------- checks and output
def relerr(a, b):
    """max-norm relative error of a against reference b."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    den = b.abs().max().item()
    return (a - b).abs().max().item() / den if den > 0 else (a - b).abs().max().item()


def worst(da, db):
    errs = {n: relerr(da[n], db[n]) for n in db}
    n = max(errs, key=errs.get)
    return errs[n], n


def check(label, value, tol, report, prefix):
    ok = value <= tol
    print(f"    {label:<44s} {value:10.3e}   tol {tol:.0e}  {'ok' if ok else 'EXCEEDS'}")
    if not ok:
        report.append(f"{prefix}: {label}: {value:.3e} > {tol:.0e} ({value / tol:.2f}x)")


def build(name, cfg, out_dir, report):
    tr = dict(TRAIN)
    clip = GRAD_CLIP[name]
    steps = tr["steps"]
    print(f"== {name}: {cfg}")
    W32 = init_weights(cfg)
    W64 = {n: t.to(torch.float64) for n, t in W32.items()}
    train_tokens = make_tokens(cfg, steps)
    toks = train_tokens[0]

    # single batch, float64
    logits, loss, grads = loss_and_grads(W64, toks, cfg)
    with torch.no_grad():
        lf, lossf = forward_functional(W64, toks[:, :-1], toks[:, 1:], cfg)
    print(f"  forward vs torch.nn.functional (f64): logits {relerr(logits, lf):.2e}, "
          f"loss {abs(loss.item() - lossf.item()) / abs(lossf.item()):.2e}")
    print(f"  loss {loss.item():.12f}  (ln V = {math.log(cfg['vocab']):.6f})")

    # training, float64
    P, losses, norms, lrs = train(W64, train_tokens, cfg, tr, clip, torch.float64)
    nclip = sum(n > clip for n in norms)
    print(f"  grad_clip {clip}: clipped on {nclip}/{steps} steps")
    for s in range(steps):
        print(f"    step {s}: lr {lrs[s]:.6e}  loss {losses[s]:.10f}  pre-clip norm {norms[s]:.6f}"
              f"{'  (clipped)' if norms[s] > clip else ''}")
    if nclip * 2 < steps:
        report.append(f"{name}: clipping active on only {nclip}/{steps} steps")
    Pt = train_torch_optim(W64, train_tokens, cfg, tr, clip)
    e, n = worst(P, Pt)
    print(f"  hand-written AdamW vs torch.optim.AdamW (f64), final params: {e:.2e} (worst {n})")

    # float32 sanity runs: same float32 start values, float32 arithmetic, same hand-written
    # optimizer; once through forward() and once through the torch.nn.functional kernels, i.e. two
    # float32 implementations with different rounding, to show the spread a C++ float32 path sees.
    for label, fwd in (("hand-written forward", forward), ("torch.nn.functional forward", forward_functional)):
        W32c = {n: t.clone() for n, t in W32.items()}
        logits32, loss32, grads32 = loss_and_grads(W32c, toks, cfg, fwd)
        P32, losses32, norms32, _ = train(W32c, train_tokens, cfg, tr, clip, torch.float32, fwd)
        print(f"  float32 ({label}) vs float64, max-norm relative error max|a-b|/max|b|:")
        pre = f"{name} f32 {'functional' if fwd is forward_functional else 'hand'}"
        check("logits", relerr(logits32, logits), 1e-5, report, pre)
        check("loss", abs(loss32.item() - loss.item()) / abs(loss.item()), 1e-5, report, pre)
        e, n = worst(grads32, grads)
        check(f"grads (worst: {n})", e, 1e-4, report, pre)
        check("train losses (max-norm over steps)",
              relerr(torch.tensor(losses32), torch.tensor(losses)), 1e-5, report, pre)
        check("train losses (worst per-step relative)",
              max(abs(a - b) / abs(b) for a, b in zip(losses32, losses)), 1e-5, report, pre)
        check("train grad_norms (worst per-step relative)",
              max(abs(a - b) / abs(b) for a, b in zip(norms32, norms)), 1e-5, report, pre)
        e, n = worst(P32, P)
        check(f"final params (worst: {n})", e, 1e-4, report, pre)
        if any((a > clip) != (b > clip) for a, b in zip(norms32, norms)):
            report.append(f"{pre}: float32 and float64 disagree on whether a step clips")

    # write
    path = os.path.join(out_dir, f"{name}.h5")
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        for k in ("vocab", "seq_len", "d_model", "n_layer", "n_head", "batch"):
            f.attrs[k] = np.int64(cfg[k])
        f.attrs["steps"] = np.int64(steps)
        for k in ("max_lr", "min_lr"):
            f.attrs[k] = np.float64(tr[k])
        f.attrs["warmup_steps"] = np.int64(tr["warmup_steps"])
        f.attrs["decay_steps"] = np.int64(tr["decay_steps"])
        for k in ("beta1", "beta2", "eps", "weight_decay"):
            f.attrs[k] = np.float64(tr[k])
        f.attrs["grad_clip"] = np.float64(clip)
        f.attrs["seed"] = np.int64(cfg["seed"])
        f.attrs["generator"] = np.bytes_("testdata/generators/make_reference.py")
        f.attrs["torch_version"] = np.bytes_(torch.__version__)
        names = [s[0] for s in param_specs(cfg)]
        for n in names:
            f.create_dataset(f"weights/{n}", data=W32[n].numpy().astype(np.float32))
        f.create_dataset("tokens", data=toks.numpy().astype(np.int32))
        f.create_dataset("logits", data=logits.numpy().astype(np.float32))
        f.create_dataset("loss", data=np.float64(loss.item()))
        for n in names:
            f.create_dataset(f"grads/{n}", data=grads[n].numpy().astype(np.float32))
        f.create_dataset("train/tokens", data=train_tokens.numpy().astype(np.int32))
        f.create_dataset("train/losses", data=np.asarray(losses, dtype=np.float64))
        f.create_dataset("train/grad_norms", data=np.asarray(norms, dtype=np.float64))
        f.create_dataset("train/lrs", data=np.asarray(lrs, dtype=np.float64))
        for n in names:
            f.create_dataset(f"train/params/{n}", data=P[n].numpy().astype(np.float32))
    os.replace(tmp, path)
    print(f"  wrote {path} ({os.path.getsize(path)} bytes)")
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="testdata/reference",
                    help="output directory (default: testdata/reference)")
    args = ap.parse_args()
    torch.set_num_threads(1)  # fixed reduction order: the same file on every machine
    os.makedirs(args.out, exist_ok=True)
    report, total = [], 0
    for name, cfg in CONFIGS.items():
        total += build(name, cfg, args.out, report)
    print(f"total size {total} bytes")
    if total >= 2 * 1024 * 1024:
        report.append(f"total size {total} bytes is not under 2 MB")
    if report:
        print("ATTENTION:")
        for r in report:
            print("  " + r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
