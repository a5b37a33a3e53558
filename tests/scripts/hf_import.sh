#!/usr/bin/env bash
# Hugging Face GPT-2 in, and llm.c token shards in (issue 25):
#  (1) a randomly initialised GPT2LMHeadModel saved by transformers (vocab 50,257, 2 layers, d 64)
#      imports with ckpt-reshard --import hf as a step-0 checkpoint with fresh moments and the
#      folder's file hashes; shardtrain's logits on a fixed batch equal transformers' within 1e-5
#      relative; the bf16 and fp16 saves import too; unimplemented architectures are refused (exit 2);
#  (2) export -> import -> export is bitwise (model.safetensors identical);
#  (3) an llm.c token shard written here (the documented header) is read by data-prep --llmc with
#      every document and token; a 10-step deterministic fine-tune from the import at W=2 on it,
#      checkpointed at step 5 and resumed at W=1, ends BITWISE equal to the uninterrupted run.
# Needs torch + transformers (scripts/python-env.sh): skipped (exit 77) with the reason without.
#
# Usage: hf_import.sh BIN_DIR WORK_DIR MODEL_LOGITS_HELPER
BIN_DIR=$1 WORK=$2 HELPER=$3
. "$(dirname "$0")/common.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
RESHARD="$BIN_DIR/ckpt-reshard"
PY=$("$ROOT/scripts/python-env.sh") || { echo "SKIPPED: torch + transformers unavailable (scripts/python-env.sh said why above)"; exit 77; }
FIX="$(dirname "$0")/hf_gpt2_fixture.py"

# (1) Import.
"$PY" "$FIX" make "$WORK/gpt2" || fail "fixture"
"$RESHARD" --import hf "$WORK/gpt2/fp32" --out "$WORK/imp" 2>&1 | grep imported || fail "import"
IMP="$WORK/imp/step_00000000"
"$RESHARD" --inspect "$IMP" --json >"$WORK/imp.json" || fail "inspect"
checks imported-manifest "$WORK/imp.json" "$WORK/gpt2/fp32" || fail "imported manifest"
"$HELPER" "$IMP" "$WORK/logits.safetensors" 2
"$PY" "$FIX" logits "$WORK/gpt2/fp32" "$WORK/logits.safetensors" || fail "logits differ from transformers'"
for d in bf16 fp16; do
  "$RESHARD" --import hf "$WORK/gpt2/$d" --out "$WORK/imp_$d" >/dev/null 2>&1 || fail "import $d"
done
"$RESHARD" --import hf "$WORK/gpt2/fp32" --out "$WORK/imp_tp" --world 4 --tp 2 --zero-stage 1 >/dev/null 2>&1 ||
  fail "import for world 4, tp 2, ZeRO-1"
pass "a transformers GPT-2 imports (fp32, bf16, fp16; also laid out for W=4 TP=2 ZeRO-1); logits match within 1e-5"
expect_exit 2 "activation_function 'gelu'" "$RESHARD" --import hf "$WORK/gpt2/bad_activation" --out "$WORK/x1"
expect_exit 2 "layer_norm_epsilon" "$RESHARD" --import hf "$WORK/gpt2/bad_eps" --out "$WORK/x2"
expect_exit 2 "untied" "$RESHARD" --import hf "$WORK/gpt2/bad_untied" --out "$WORK/x3"
expect_exit 2 "model_type 'llama'" "$RESHARD" --import hf "$WORK/gpt2/bad_not_gpt2" --out "$WORK/x4"
expect_exit 2 "beyond the model" "$RESHARD" --import hf "$WORK/gpt2/bad_context" --out "$WORK/x5"
expect_exit 2 "exists" "$RESHARD" --import hf "$WORK/gpt2/fp32" --out "$WORK/imp"
for x in x1 x2 x3 x4 x5; do [ ! -e "$WORK/$x" ] && [ ! -e "$WORK/$x.import.h5" ] || fail "a refused import left $x"; done
pass "unimplemented architectures and an existing --out are refused (exit 2), nothing written"

# (3, first half) An llm.c shard: 256 int32 header (magic 20240520, version 1, N), N uint16 tokens,
# each document preceded by end-of-text 50256.
checks make-llmc-shard "$WORK/shard.bin" "$WORK/shard_docs.json"
"$BIN_DIR/data-prep" --llmc "$WORK/shard.bin" --owner web --event-time 2024-05-01T00:00:00Z -o "$WORK/shard.h5" \
  >"$WORK/shard.json" 2>"$WORK/shard.err" || { cat "$WORK/shard.err" >&2; fail "data-prep --llmc"; }
checks llmc-summary "$WORK/shard.json" "$WORK/shard_docs.json" || fail "data-prep --llmc summary"

# (2) export -> import -> export, bitwise.
"$RESHARD" "$IMP" --export hf --data "$WORK/shard.h5" --out "$WORK/e1" >/dev/null 2>&1 || fail "export of the import"
"$RESHARD" --import hf "$WORK/e1" --out "$WORK/imp2" >/dev/null 2>&1 || fail "import of the export"
"$RESHARD" "$WORK/imp2/step_00000000" --export hf --data "$WORK/shard.h5" --out "$WORK/e2" >/dev/null 2>&1 || fail "export 2"
cmp "$WORK/e1/model.safetensors" "$WORK/e2/model.safetensors" || fail "export -> import -> export is not bitwise"
cmp "$WORK/e1/config.json" "$WORK/e2/config.json" || fail "config.json differs after the round trip"
pass "export -> import -> export: model.safetensors and config.json bitwise identical"

# (3) Fine-tune from the import, deterministic; resume on another world size.
FT=(--data "$WORK/shard.h5" --vocab 50257 --seq-len 64 --layers 2 --heads 2 --d-model 64 --global-batch 4
    --micro-batch 1 --deterministic --peak-gflops 100 --log-every 1000 --lr 1e-3 --warmup 2 --decay-steps 10)
ft() { local np=$1 dir=$2; shift 2
  mpirun -np "$np" --oversubscribe "$BIN_DIR/ddp-train" "${FT[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1 ||
    { local rc=$?; cat "$dir.log" >&2; return $rc; }; }
ft 2 "$WORK/ft_full" --resume "$IMP" --steps 10 || fail "fine-tune"
grep -q "fine-tuning from" "$WORK/ft_full.log" || fail "the trainer did not say it fine-tunes"
ft 2 "$WORK/ft_a" --resume "$IMP" --steps 5 --ckpt-every 5 || fail "fine-tune, first half"
ft 1 "$WORK/ft_b" --resume "$WORK/ft_a/checkpoints/step_00000005" --steps 10 || fail "fine-tune resumed at W=1"
grep -q "resumed from" "$WORK/ft_b.log" || fail "the second half did not resume"
expect_verdict BITWISE "$WORK/ft_full/params.h5" "$WORK/ft_b/params.h5"
pass "10-step fine-tune from the import at W=2 = 5 steps at W=2 + 5 resumed at W=1, bitwise"
