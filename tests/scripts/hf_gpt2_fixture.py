#!/usr/bin/env python3
"""Fixtures and checks of the GPT-2 import test (tests/scripts/hf_import.sh), run under torch + transformers.

    PY hf_gpt2_fixture.py make DIR            a randomly initialised GPT2LMHeadModel (seed 25; vocab 50,257,
                                              2 layers, d 64, 2 heads, context 64) saved by save_pretrained in
                                              DIR/fp32, DIR/bf16 and DIR/fp16; and folders transformers writes
                                              that the import must refuse: DIR/bad_<why>
    PY hf_gpt2_fixture.py make-shape DIR L D H T
                                              one randomly initialised GPT2LMHeadModel (seed 25, vocab 50,257)
                                              of L layers, width D, H heads, context T, in DIR (fp32 only:
                                              GPT-2 small is 12 768 12 1024; bench/specs/gpt2-chain.json)
    PY hf_gpt2_fixture.py logits DIR LOGITS   compares transformers' logits of DIR on the tokens of LOGITS
                                              (model_logits_helper's safetensors: tokens, logits) with the
                                              logits stored there: max |diff| / max |theirs| <= 1e-5 (fp32 both
                                              sides; the two forwards differ in float32 operation order,
                                              ~1e-7 relative; a wrong transpose or name gives O(1))
"""
import json
import shutil
import sys

import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel


def random_gpt2(layers, width, heads, context):
    torch.manual_seed(25)
    config = GPT2Config(vocab_size=50257, n_positions=context, n_embd=width, n_layer=layers, n_head=heads,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # biases and LayerNorm affine non-trivial, so a lost tensor shows
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.add_(torch.randn_like(p) * 0.05)
    return model


def make_shape(out, layers, width, heads, context):
    model = random_gpt2(layers, width, heads, context)
    model.save_pretrained(out, safe_serialization=True)
    print(f"made a GPT2LMHeadModel in {out}: {sum(p.numel() for p in model.parameters())} parameters")


def make(out):
    model = random_gpt2(2, 64, 2, 64)
    model.save_pretrained(f"{out}/fp32", safe_serialization=True)
    model.to(torch.bfloat16).save_pretrained(f"{out}/bf16", safe_serialization=True)
    GPT2LMHeadModel.from_pretrained(f"{out}/fp32").to(torch.float16).save_pretrained(f"{out}/fp16", safe_serialization=True)

    def bad(why, change):
        d = f"{out}/bad_{why}"
        shutil.copytree(f"{out}/fp32", d)
        c = json.load(open(f"{d}/config.json"))
        change(c)
        json.dump(c, open(f"{d}/config.json", "w"))
    bad("activation", lambda c: c.update(activation_function="gelu"))
    bad("eps", lambda c: c.update(layer_norm_epsilon=1e-6))
    bad("untied", lambda c: c.update(tie_word_embeddings=False))
    bad("not_gpt2", lambda c: c.update(model_type="llama", architectures=["LlamaForCausalLM"]))
    bad("context", lambda c: c.update(n_ctx=128))
    print(f"made GPT2LMHeadModel fixtures in {out}: {sum(p.numel() for p in model.parameters())} parameters")


def logits(folder, path):
    ours = load_file(path)
    tokens, want = ours["tokens"].long(), ours["logits"].double()
    model = GPT2LMHeadModel.from_pretrained(folder).eval()
    with torch.no_grad():
        got = model(tokens[:, :-1]).logits.double()
    rel = ((got - want).abs().max() / want.abs().max()).item()
    print(f"logits {tuple(got.shape)}: max |shardtrain - transformers| / max |transformers| = {rel:.2e} (bound 1e-5)")
    return 0 if rel <= 1e-5 else 1


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "make-shape":
        make_shape(sys.argv[2], *map(int, sys.argv[3:7]))
    else:
        sys.exit(logits(sys.argv[2], sys.argv[3]))
