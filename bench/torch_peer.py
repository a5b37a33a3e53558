#!/usr/bin/env python3
"""The PyTorch peer of shardtrain's benchmarks: the same decoder, trained the same way, in PyTorch.

Model (identical to shardtrain's, docs/ARCHITECTURE.md "The decoder"): GPT-2 style, pre-LayerNorm
blocks (fused qkv projection, causal self-attention, tanh-approximated GELU MLP of width 4C),
learned position embeddings, final LayerNorm and an LM head tied to the token embedding; AdamW
(lr 3e-4). The batch is random tokens of the byte vocabulary (256), so the data path costs nothing
on either side and the figure is the training step alone.

Output: one JSON line on standard output,
  {"params": N, "world": W, "step_s_median": seconds, "tokens_per_s": tokens per second,
   "torch": version, "sdpa": 0|1, "compile": 0|1}
where the median (the upper one of an even count) is over the steps after the first two (warm-up) and tokens/s counts all ranks:
micro x seq x world / median step.

  python3 bench/torch_peer.py --layers 4 --d 256 --heads 4 --seq 256 --micro 8 --steps 20 --threads 1
  python3 bench/torch_peer.py --world 2 ...        # DDP over gloo, one process per rank, loopback only
  python3 bench/torch_peer.py --sdpa 1 --compile 1 # fused attention and torch.compile (PyTorch 2.x)
  python3 bench/torch_peer.py --sdpa 1 --profile 1 # plus a per-kernel table (torch.profiler) on stderr

Used by bench/specs/peer.json (one rank, ratio of throughputs; PyTorch 2.x from PyPI in the cached
environment of scripts/python-env.sh peer, eager with --sdpa 1 and --compile 1) and
bench/specs/ddp.json (the peer's own E(2)). Needs PyTorch: a PyPI wheel (the strongest CPU
configuration, with --sdpa 1) or Debian's python3-torch (1.13, no SDPA; its OpenBLAS misdetects
recent x86 processors, so run it with OPENBLAS_CORETYPE=SkylakeX).

--profile 1 records the timed steps with torch.profiler and prints, on standard error, the
operators by self CPU time per step (the same step as shardtrain's bench "[step-profile]").
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, fused):
        super().__init__()
        self.heads, self.fused = heads, fused
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):  # x: (B, T, C)
        batch, steps, width = x.shape
        head = width // self.heads
        # (B, T, 3C) -> three (B, NH, T, HS)
        q, k, v = (t.reshape(batch, steps, self.heads, head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(head)            # (B, NH, T, T)
            future = torch.ones(steps, steps, dtype=torch.bool).triu(1)
            y = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(batch, steps, width))


class DecoderBlock(nn.Module):
    def __init__(self, width, heads, fused):
        super().__init__()
        self.norm_attn = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, fused)
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp_in = nn.Linear(width, 4 * width)
        self.mlp_out = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attn(self.norm_attn(x))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.norm_mlp(x)), approximate="tanh"))


class Decoder(nn.Module):
    def __init__(self, vocab, context, width, layers, heads, fused):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(DecoderBlock(width, heads, fused) for _ in range(layers))
        self.norm_final = nn.LayerNorm(width)

    def forward(self, tokens, targets):  # (B, T) each -> mean cross-entropy
        positions = torch.arange(tokens.shape[1])
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.norm_final(x) @ self.token_embedding.weight.t()  # tied head: (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def train(rank, args):
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    if args.world > 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        dist.init_process_group("gloo", rank=rank, world_size=args.world)
    model = Decoder(args.vocab, args.seq, args.d, args.layers, args.heads, bool(args.sdpa))
    parameters = sum(p.numel() for p in model.parameters())
    if args.world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    if args.compile:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    draws = torch.Generator().manual_seed(1 + rank)
    step_s = []
    profiler = None
    for step in range(args.steps):
        if args.profile and step == 2:  # after the warm-up steps (and any compilation)
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            profiler.__enter__()
        batch = torch.randint(0, args.vocab, (args.micro, args.seq + 1), generator=draws)
        start = time.perf_counter()
        loss = model(batch[:, :-1], batch[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step_s.append(time.perf_counter() - start)
    if profiler is not None:
        profiler.__exit__(None, None, None)
        timed = args.steps - 2
        table = sorted(profiler.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in table)
        print(f"# torch.profiler, {timed} steps: self CPU time per step, all operators {total / timed / 1e3:.1f} ms",
              file=sys.stderr)
        print(f"{'operator':<52} {'calls/step':>10} {'ms/step':>10} {'%':>7}", file=sys.stderr)
        for e in table[:args.profile_rows]:
            print(f"{e.key[:52]:<52} {e.count / timed:>10.1f} {e.self_cpu_time_total / timed / 1e3:>10.2f} "
                  f"{100 * e.self_cpu_time_total / total:>6.1f}%", file=sys.stderr)
    if rank == 0:
        median = statistics.median_high(step_s[2:])
        print(json.dumps({"params": parameters, "world": args.world, "step_s_median": median,
                          "tokens_per_s": args.micro * args.seq * args.world / median,
                          "torch": torch.__version__, "sdpa": args.sdpa, "compile": args.compile}))
    if args.world > 1:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = dict(layers=4, d=256, heads=4, seq=256, micro=8, steps=20, vocab=256, threads=1,
                    world=1, sdpa=0, compile=0, profile=0, profile_rows=30)
    for name, value in defaults.items():
        parser.add_argument("--" + name, type=int, default=value)
    args = parser.parse_args()
    if args.steps < 3:
        parser.error("--steps must be at least 3 (the first two are warm-up)")
    if args.world > 1:
        mp.spawn(train, args=(args,), nprocs=args.world)
    else:
        train(0, args)


if __name__ == "__main__":
    main()
