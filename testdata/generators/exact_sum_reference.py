#!/usr/bin/env python3
"""Reference sums for deterministic mode's gradient sum (libcore/include/shardtrain/parallel/exact_sum.hpp),
computed independently of the C++ code with exact rational arithmetic (fractions.Fraction).

The rule, restated from the header's contract (the C++ splits values into two 40-bit digits in int64
lanes; none of that is used here):
  * per chunk of 256 consecutive elements (chunks restart at every segment), D(v) = floor((floor(log2|v|)
    + 149) / 40) for each nonzero value of the chunk in every micro-batch, T = max(1, max D(v)),
    B = 40 (T - 1) - 149;
  * each value is truncated toward zero to a multiple of 2^B; the truncated values are added exactly;
  * the exact sum is rounded once to fp32: nearest, ties to even, with IEEE subnormals, and +-Inf when
    the rounded magnitude reaches 2^128. A zero sum is +0.
For every case the file also states in how many elements the rule equals the correctly rounded exact sum
of the untruncated values (it does whenever no value of the chunk reaches below 2^B).

Output: testdata/reference/exact_sum.txt, text, one block per case:
  case NAME N SEGMENTS        (N micro-batches; SEGMENTS comma-separated lengths, n = their sum)
  in  X1 ... Xn             (N lines: a micro-batch's values as 8-digit hex fp32 bit patterns)
  sum S1 ... Sn             (the rule's fp32 results, same form)
  exact K                   (elements where the rule equals the correctly rounded exact sum)
Deterministic (random.Random with fixed seeds). Usage: exact_sum_reference.py [OUTPUT]
"""
import math
import os
import random
import struct
import sys
from fractions import Fraction

CHUNK = 256
DIGIT = 40
BIAS = 149


def f32(x):
    """The nearest fp32 of a Python float that is one already (asserted)."""
    (b,) = struct.unpack("<I", struct.pack("<f", x))
    assert struct.unpack("<f", struct.pack("<I", b))[0] == x or math.isnan(x), x
    return b


def from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def round_f32(q):
    """Fraction -> fp32 bit pattern, rounded to nearest, ties to even; subnormals; +-Inf on overflow."""
    if q == 0:
        return 0
    sign = 0x80000000 if q < 0 else 0
    x = abs(q)
    e = x.numerator.bit_length() - x.denominator.bit_length()  # 2^e <= x < 2^(e+2) roughly: fix below
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    ulp = max(e - 23, -149)
    m = round(x / Fraction(2) ** ulp)  # Fraction rounding: nearest, ties to even
    value = Fraction(m) * Fraction(2) ** ulp
    if value >= Fraction(2) ** 128:
        return sign | 0x7F800000
    return sign | f32(float(value))


def chunks(segments):
    base = 0
    for length in segments:
        for lo in range(base, base + length, CHUNK):
            yield lo, min(base + length, lo + CHUNK)
        base += length


def rule_sum(inputs, segments):
    n = sum(segments)
    out = [0] * n
    exact_matches = 0
    for lo, hi in chunks(segments):
        top = 1
        for mb in inputs:
            for i in range(lo, hi):
                v = from_bits(mb[i])
                if v != 0:
                    top = max(top, (math.frexp(v)[1] - 1 + BIAS) // DIGIT)
        unit = Fraction(2) ** (DIGIT * (top - 1) - BIAS)
        for i in range(lo, hi):
            kept = sum(int(Fraction(from_bits(mb[i])) / unit) for mb in inputs)  # int(): toward zero
            out[i] = round_f32(kept * unit)
            if out[i] == round_f32(sum(Fraction(from_bits(mb[i])) for mb in inputs)):
                exact_matches += 1
    return out, exact_matches


def rand_f32(rng, lo_exp, hi_exp):
    """A random normal fp32 with exponent in [lo_exp, hi_exp], random sign and mantissa."""
    e = rng.randint(lo_exp, hi_exp)
    b = ((e + 127) << 23) | rng.getrandbits(23) | (rng.getrandbits(1) << 31)
    return b


def case_span(rng):
    """One chunk whose values span 2^-126 .. 2^127 (every micro-batch), some zeros and subnormals."""
    seg = [256]
    ins = []
    for _ in range(12):
        mb = [rand_f32(rng, -126, 127) for _ in range(256)]
        for i in rng.sample(range(256), 20):
            mb[i] = 0
        for i in rng.sample(range(256), 10):
            mb[i] = rng.randint(1, 0x7FFFFF) | (rng.getrandbits(1) << 31)  # subnormal
        ins.append(mb)
    return "span", seg, ins


def case_cancel(rng):
    """Heavy cancellation: micro-batches in pairs +x, -x, plus small residues inside the window (one
    segment, exact); and a segment where +-2^100 cancel and a 1.0 lies below the window (the rule drops it)."""
    n = 40
    ins = [[0] * n for _ in range(12)]
    for i in range(n):
        for m in range(0, 12, 2):
            x = from_bits(rand_f32(rng, -5, 20))
            ins[m][i] = f32(x)
            ins[m + 1][i] = f32(-x)
        # residues 2^-30 .. 2^-10 of the element's scale, in a few micro-batches
        for m in rng.sample(range(12), 3):
            y = from_bits(ins[m][i])
            r = from_bits(rand_f32(rng, -30, -10))
            ins[m][i] = f32(struct.unpack("<f", struct.pack("<f", y + r))[0])
    for i in range(n - 4, n):
        ins[0][i] = f32(2.0 ** 100)
        ins[1][i] = f32(-(2.0 ** 100))
        ins[2][i] = f32(1.0)
    return "cancel", [n - 4, 4], ins


def case_subnormal(rng):
    """Subnormals and the smallest normals only: the whole sum is exact, some results subnormal."""
    n = 64
    ins = []
    for _ in range(12):
        mb = []
        for _ in range(n):
            if rng.random() < 0.8:
                mb.append(rng.randint(1, 0x7FFFFF) | (rng.getrandbits(1) << 31))
            else:
                mb.append(rand_f32(rng, -126, -120))
        ins.append(mb)
    return "subnormal", [n], ins


def case_gradient(rng):
    """Gradient-like values over several segments: per micro-batch scales 2^-10 .. 2^6, elements spread
    over 2^-30 of them, all-zero chunks, and spikes 2^30 above the rest in one micro-batch (the run
    the old range-limited sum refused)."""
    segments = [600, 256, 3, 700]
    n = sum(segments)
    ins = []
    for m in range(12):
        s = rng.randint(-10, 6)
        mb = []
        for _ in range(n):
            x = rng.uniform(-1, 1) * 2.0 ** (s + rng.randint(-30, 0))
            mb.append(f32(struct.unpack("<f", struct.pack("<f", x))[0]))
        for lo, hi in chunks(segments):
            kind = rng.randint(0, 9)
            if kind == 0:
                mb[lo:hi] = [0] * (hi - lo)
            if kind == 1 and m == 5:
                mb[lo] = f32(1.5 * 2.0 ** (s + 30))
        ins.append(mb)
    return "gradient", segments, ins


def case_ties_and_overflow(rng):
    """Exact ties of the final rounding, ties broken by a bit far below (one segment), and sums beyond
    fp32's range (another)."""
    ins = [[0] * 8 for _ in range(12)]
    cols = [
        [1.0, 2.0 ** -24],                       # a tie: rounds to even, 1.0
        [1.0, 3 * 2.0 ** -24],                   # a tie: rounds to even, 1 + 2^-22
        [1.0, 2.0 ** -24, 2.0 ** -40],           # above the tie: rounds up
        [-1.0, -(2.0 ** -24), 2.0 ** -40],       # below the tie (in magnitude): rounds to -1.0
        [3.4e38, 3.4e38],                        # overflow: +Inf
        [-3.4e38, -3.4e38, -3.4e38],             # overflow: -Inf
        [3.4028234663852886e38, 2.0 ** 103],     # FLT_MAX + half an ulp: a tie that rounds to Inf
        [2.0 ** -149, 2.0 ** -149, -(2.0 ** -148)],  # exact cancellation of subnormals: +0
    ]
    for i, vals in enumerate(cols):
        for m, v in enumerate(vals):
            ins[m][i] = f32(struct.unpack("<f", struct.pack("<f", v))[0])
    return "ties", [4, 4], ins


def case_permutations(rng):
    """A small set for every order: 5 micro-batches of 5 elements, magnitudes 2^-140 .. 2^120."""
    exps = [120, 60, 0, -70, -140]
    ins = []
    for m in range(5):
        mb = []
        for i in range(5):
            e = exps[(i + m) % 5]
            mb.append(f32(struct.unpack("<f", struct.pack("<f", rng.choice([-1, 1]) * rng.uniform(1, 2) * 2.0 ** e))[0]))
        ins.append(mb)
    return "permutations", [5], ins


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "reference", "exact_sum.txt")
    rng = random.Random(4747)
    lines = ["# Generated by testdata/generators/exact_sum_reference.py (exact rational arithmetic); do not edit.",
             "# Read by tests/test_exact_sum.cpp. Format: the generator's docstring."]
    for make in (case_span, case_cancel, case_subnormal, case_gradient, case_ties_and_overflow, case_permutations):
        name, segments, ins = make(rng)
        sums, exact = rule_sum(ins, segments)
        lines.append("case %s %d %s" % (name, len(ins), ",".join(map(str, segments))))
        lines += ["in " + " ".join("%08x" % b for b in mb) for mb in ins]
        lines.append("sum " + " ".join("%08x" % b for b in sums))
        lines.append("exact %d" % exact)
        print("%-12s n=%-5d N=%-3d rule == correctly rounded exact sum in %d elements" % (name, len(sums), len(ins), exact))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
