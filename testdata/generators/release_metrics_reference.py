#!/usr/bin/env python3
"""Reference values for release-gate's evaluation math, computed independently with NumPy.

Writes testdata/release_metrics_reference.json, read by tests/test_release_metrics.cpp:
  * logits (float32, N positions x V classes, seeded, spread so every confidence bin is used) and
    targets; per-position loss, confidence, top-1, top-5 and Brier terms; ECE over 15 bins, the
    reliability table and the mean Brier score (definitions: libcore/include/shardtrain/stats/calibration.hpp);
  * bootstrap units (loss sums, token counts) and the percentile interval of the ratio statistic,
    replaying the counter-based draws of libcore/include/shardtrain/stats/bootstrap.hpp with
    Python integers (splitmix64 finaliser, 128-bit product) and numpy.percentile (method "linear").

Usage: /usr/bin/python3 testdata/generators/release_metrics_reference.py [OUT.json]   (Debian: python3-numpy)
"""
import json
import sys

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def bootstrap(loss_sums, tokens, resamples, seed, level):
    n = len(loss_sums)
    stats = []
    for r in range(resamples):
        idx = [(mix64((seed + (r * n + j + 1) * GOLDEN) & MASK) * n) >> 64 for j in range(n)]
        stats.append(loss_sums[idx].sum() / tokens[idx].sum())
    stats = np.array(stats)
    return {
        "estimate": float(loss_sums.sum() / tokens.sum()),
        "lower": float(np.percentile(stats, 100 * (1 - level) / 2)),
        "upper": float(np.percentile(stats, 100 * (1 + level) / 2)),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "testdata/release_metrics_reference.json"
    rng = np.random.default_rng(20261201)
    n, vocab, bins = 600, 11, 15
    # Logit scales from flat to peaked, so the confidences cover [1/V, 1).
    scale = rng.uniform(0.0, 6.0, size=(n, 1))
    logits = (rng.standard_normal((n, vocab)) * scale).astype(np.float32)
    targets = rng.integers(0, vocab, size=n)
    # Make about half the targets the argmax so the accuracy is not trivial.
    take = rng.random(n) < 0.5
    targets[take] = logits[take].argmax(axis=1)

    x = logits.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    rows = np.arange(n)
    p_t = p[rows, targets]
    loss = -np.log(p_t)
    conf = p.max(axis=1)
    pred = p.argmax(axis=1)  # first index reaching the max, as the C++ ties rule
    top1 = pred == targets
    lt = logits[rows, targets][:, None]
    ks = np.arange(vocab)[None, :]
    above = ((logits > lt) | ((logits == lt) & (ks < targets[:, None]))).sum(axis=1)
    top5 = above < 5
    brier = (p ** 2).sum(axis=1) - 2 * p_t + 1
    b = np.minimum(bins - 1, np.floor(conf * bins).astype(int))
    table, ece = [], 0.0
    for k in range(bins):
        m = b == k
        cnt = int(m.sum())
        table.append({"count": cnt,
                      "mean_confidence": float(conf[m].mean()) if cnt else None,
                      "accuracy": float(top1[m].mean()) if cnt else None})
        if cnt:
            ece += cnt / n * abs(top1[m].mean() - conf[m].mean())

    # Bootstrap units: 40 "sequences" of 15 positions each, and a ragged set of unit sizes.
    seq_sums = loss.reshape(40, 15).sum(axis=1)
    seq_tokens = np.full(40, 15.0)
    sizes = rng.integers(1, 30, size=25)
    ragged_tokens = sizes.astype(np.float64)
    ragged_sums = np.array([loss[:s].sum() * (1 + 0.1 * i) for i, s in enumerate(sizes)])
    cases = []
    for name, sums, toks, resamples, seed, level in [
            ("sequences", seq_sums, seq_tokens, 1000, 7, 0.95),
            ("ragged", ragged_sums, ragged_tokens, 501, 12345678901234567890, 0.9)]:
        cases.append({"name": name, "loss_sums": sums.tolist(), "tokens": toks.tolist(), "resamples": resamples,
                      "seed": str(seed), "level": level, **bootstrap(sums, toks, resamples, seed, level)})

    ref = {
        "generator": "testdata/generators/release_metrics_reference.py",
        "vocab": vocab, "bins": bins,
        "logits": [float(v) for v in logits.ravel()],
        "targets": targets.tolist(),
        "loss": loss.tolist(), "confidence": conf.tolist(), "top1": top1.tolist(), "top5": top5.tolist(),
        "brier_terms": brier.tolist(),
        "ece": ece, "brier": float(brier.mean()), "top1_accuracy": float(top1.mean()),
        "top5_accuracy": float(top5.mean()), "reliability": table,
        "bootstrap": cases,
    }
    with open(out, "w") as f:
        json.dump(ref, f)
        f.write("\n")
    print(f"wrote {out}: {n} positions, ECE {ece:.6f}, Brier {brier.mean():.6f}")


if __name__ == "__main__":
    main()
