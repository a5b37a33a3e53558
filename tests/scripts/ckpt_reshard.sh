#!/usr/bin/env bash
# ckpt-reshard end to end (issue 14):
#  (1) a checkpoint of fsdp-train at W=4, ZeRO-3 -> ckpt-reshard --world 3 --zero-stage 1 (one
#      process, and under mpirun -np 3: the same tensors) -> fsdp-train resumed at W=3 ZeRO-1 from
#      it continues BITWISE as the same resume from the original checkpoint (parameters, losses,
#      the next checkpoint's tensors); the resharded rank files hold exactly the pieces the W=3
#      ZeRO-1 trainer writes itself; moments and manifest (sampler, LR, data) carried, history kept;
#  (2) --consolidate: one plain-dataset HDF5 (no virtual datasets), every tensor bitwise; and back
#      (consolidated -> W=4 ZeRO-3): every tensor bitwise, the trainer's own piece layout;
#  (3) --inspect: OK on a good checkpoint; a flipped byte is named (exit 1); reshard refuses it (exit 2);
#  (4) refusals with exit 2: existing --out, a world size the global batch cannot split into,
#      a --tp not dividing --world or the model, --dtype bf16 on a reshard (a dtype loss on moments);
#  (5) --export safetensors fp32 and bf16: tests/clients/check-gpt2-export.py rebuilds GPT-2 from the file
#      and compares its logits with shardtrain's (tests/model_logits_helper.cpp);
#  (6) tensor-parallel targets: the W=4 ZeRO-3 source -> --world 4 --tp 2 --zero-stage 2 and
#      --world 2 --tp 2 --zero-stage 0 (DDP x TP): the trainer resumed on that mesh from the resharded
#      checkpoint continues BITWISE as from the original, and the rank files hold exactly the pieces
#      that mesh's trainer writes itself; the TP layout resharded back to W=4 ZeRO-3: every tensor bitwise.
#
# Usage: ckpt_reshard.sh BIN_DIR WORK_DIR MODEL_LOGITS_HELPER
BIN_DIR=$1 WORK=$2 HELPER=$3
. "$(dirname "$0")/common.sh"
RESHARD="$BIN_DIR/ckpt-reshard"
PY=/usr/bin/python3  # Debian's interpreter: python3-numpy (and python3-torch where installed)
F=(--seq-len 32 --layers 2 --heads 2 --d-model 32 --global-batch 12 --micro-batch 1 --peak-gflops 100 --log-every 1000)
ftrain() {  # ftrain NP RUN_DIR [fsdp-train options...]; --zero-stage 0 runs ddp-train (DDP) with the rest
  local np=$1 dir=$2 tool=fsdp-train; shift 2
  local args=()
  while [ $# -gt 0 ]; do
    if [ "$1" = --zero-stage ] && [ "$2" = 0 ]; then tool=ddp-train; shift 2; else args+=("$1"); shift; fi
  done
  set -- "${args[@]}"
  mpirun -np "$np" --oversubscribe "$BIN_DIR/$tool" --data "$DATA" "${F[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1 ||
    { local rc=$?; cat "$dir.log" >&2; return $rc; }
}
pieces_of() { h5ls -r "$1" | awk '$1 ~ /^\/pieces\/.*\/[0-9]+$/ {print $1}' | sort; }
same_piece_layout() {  # same_piece_layout CKPT_A CKPT_B: every rank file holds the same piece datasets
  local a=$1 b=$2 n=0
  for f in "$a"/rank_*.h5; do
    [ -f "$b/$(basename "$f")" ] || fail "$b has no $(basename "$f")"
    diff <(pieces_of "$f") <(pieces_of "$b/$(basename "$f")") >/dev/null || fail "$(basename "$f"): other pieces in $a and $b"
    n=$((n + 1))
  done
  [ "$n" -eq "$(ls "$b"/rank_*.h5 | wc -l)" ] && [ "$n" -gt 0 ] || fail "$a and $b have other rank file counts"
  echo "  $n rank files: the same piece datasets in $a and $b"
}

# (1) W=4 ZeRO-3 source, resharded to W=3 ZeRO-1.
ftrain 4 "$WORK/src" --zero-stage 3 --steps 4 --ckpt-every 4
SRC="$WORK/src/checkpoints/step_00000004"
"$RESHARD" "$SRC" --world 3 --zero-stage 1 --out "$WORK/r1" >"$WORK/r1.log" 2>&1 || { cat "$WORK/r1.log"; fail "reshard"; }
grep "ckpt-reshard: wrote" "$WORK/r1.log"
mpirun -np 3 --oversubscribe "$RESHARD" "$WORK/src/checkpoints" --world 3 --zero-stage 1 --out "$WORK/r3" >"$WORK/r3.log" 2>&1 ||
  { cat "$WORK/r3.log"; fail "reshard under mpirun"; }
R1="$WORK/r1/step_00000004"
[ "$(cat "$WORK/r1/latest")" = step_00000004 ] || fail "no latest in the resharded directory"
expect_verdict BITWISE "$R1/index.h5" "$SRC/index.h5" --group tensors
expect_verdict BITWISE "$WORK/r3/step_00000004/index.h5" "$R1/index.h5" --group tensors
pass "reshard W=4 ZeRO-3 -> W=3 ZeRO-1 (1 process and 3 processes): every tensor, moments included, bitwise"

"$RESHARD" --inspect "$WORK/r1" --json >"$WORK/r1.json"
checks resharded-manifest "$WORK/r1.json" --world 3 --dp 3 --tp 1 --zero-stage 1 --grad-accum 4 --from-world 4 \
  --from-zero-stage 3 --step 4 --consumed 48 || fail "the resharded manifest"
pass "manifest rewritten (layout, writers, grad_accum) with the source layout in its history; sampler and LR carried"

# Resume at W=3 ZeRO-1: from the original checkpoint and from the resharded one.
mkdir -p "$WORK/direct" && cp -r "$WORK/src/checkpoints" "$WORK/direct/checkpoints"
cp -r "$WORK/r1" "$WORK/via_ckpt"
ftrain 3 "$WORK/direct" --zero-stage 1 --steps 8 --ckpt-every 4 --resume auto
ftrain 3 "$WORK/via" --zero-stage 1 --steps 8 --ckpt-every 4 --resume auto --ckpt-dir "$WORK/via_ckpt"
grep -q "resumed from .*via_ckpt/step_00000004" "$WORK/via.log" || fail "the run did not resume from the resharded checkpoint"
expect_verdict BITWISE "$WORK/via/params.h5" "$WORK/direct/params.h5"
expect_verdict BITWISE "$WORK/via/steps.rank0.jsonl" "$WORK/direct/steps.rank0.jsonl"
expect_verdict BITWISE "$WORK/via_ckpt/step_00000008/index.h5" "$WORK/direct/checkpoints/step_00000008/index.h5" --group tensors
pass "fsdp-train at W=3 ZeRO-1 resumed from the resharded checkpoint continues bitwise as from the original"
same_piece_layout "$R1" "$WORK/direct/checkpoints/step_00000008"
pass "each resharded rank file holds exactly the pieces the W=3 ZeRO-1 trainer writes for that rank"

# (2) consolidate, and back.
"$RESHARD" "$SRC" --consolidate --out "$WORK/c.h5" 2>&1 | grep "consolidated"
virtual=$(h5dump -p -H "$WORK/c.h5" | grep -c "VIRTUAL" || true)
contiguous=$(h5dump -p -H "$WORK/c.h5" | grep -c "CONTIGUOUS" || true)
ntensors=$(h5ls "$WORK/c.h5/tensors" | wc -l)
echo "  c.h5: $ntensors datasets, $contiguous contiguous, $virtual virtual"
[ "$ntensors" -gt 0 ] && [ "$virtual" -eq 0 ] && [ "$contiguous" -eq "$ntensors" ] || fail "the consolidated file has non-plain datasets"
expect_verdict BITWISE "$WORK/c.h5" "$SRC/index.h5" --group tensors
"$RESHARD" "$WORK/c.h5" --world 4 --zero-stage 3 --out "$WORK/back" >/dev/null 2>&1 || fail "reshard of the consolidated file"
expect_verdict BITWISE "$WORK/back/step_00000004/index.h5" "$SRC/index.h5" --group tensors
same_piece_layout "$WORK/back/step_00000004" "$SRC"
"$RESHARD" --inspect "$WORK/c.h5" | grep "^verdict: OK" || fail "inspect of the consolidated file"
pass "consolidate: plain datasets, every tensor bitwise; consolidated -> W=4 ZeRO-3: bitwise, the trainer's layout"

# (3) inspect on a good and on a corrupted checkpoint.
"$RESHARD" --inspect "$SRC" >"$WORK/inspect.txt" || { cat "$WORK/inspect.txt"; fail "inspect of a good checkpoint"; }
grep -E "^(step|layout|data|verdict)" "$WORK/inspect.txt"
cp -r "$WORK/src/checkpoints" "$WORK/corrupt"
checks flip-byte "$WORK/corrupt/step_00000004/rank_00002.h5"
expect_exit 1 "rank_00002.h5" "$RESHARD" --inspect "$WORK/corrupt/step_00000004"
"$RESHARD" --inspect "$WORK/corrupt" --json >"$WORK/corrupt.json" || true
checks inspect-verdict "$WORK/corrupt.json" CORRUPT rank_00002.h5 || fail "--inspect --json does not name the corrupt file"
expect_exit 2 "rank_00002.h5.*(SHA-256|corrupt)" "$RESHARD" "$WORK/corrupt/step_00000004" --world 2 --out "$WORK/from_corrupt"
[ ! -e "$WORK/from_corrupt" ] || fail "a refused reshard left $WORK/from_corrupt"
pass "--inspect names the corrupt rank file (exit 1); ckpt-reshard refuses it (exit 2, nothing written)"

# (4) refusals.
expect_exit 2 "exists" "$RESHARD" "$SRC" --world 2 --out "$WORK/r1"
expect_exit 2 "global batch 12 is not a multiple of micro-batch 1 x 5" "$RESHARD" "$SRC" --world 5 --out "$WORK/w5"
expect_exit 2 "world 3 is not a multiple of --tp 2" "$RESHARD" "$SRC" --world 3 --tp 2 --out "$WORK/tp2"
expect_exit 2 "heads" "$RESHARD" "$SRC" --world 4 --tp 4 --out "$WORK/tp4"
expect_exit 2 "dtype loss on moments" "$RESHARD" "$SRC" --world 2 --dtype bf16 --out "$WORK/bf16"
for d in w5 tp2 tp4 bf16; do [ ! -e "$WORK/$d" ] || fail "a refusal left $WORK/$d"; done
pass "refusals: existing output, unsplittable world size, --tp not dividing W or the heads, dtype loss on moments (exit 2, nothing written)"

# (5) export: GPT-2 safetensors, fp32 and bf16, against shardtrain's logits.
mkdir -p "$WORK/e32" "$WORK/e16"
"$RESHARD" "$SRC" --export safetensors --out "$WORK/e32/model.safetensors" 2>&1 | grep exported
"$RESHARD" "$SRC" --export safetensors --dtype bf16 --out "$WORK/e16/model.safetensors" >/dev/null 2>&1 || fail "bf16 export"
expect_exit 2 "exists" "$RESHARD" "$SRC" --export safetensors --out "$WORK/e32/model.safetensors"
"$HELPER" "$SRC" "$WORK/logits.safetensors" 3
$PY "$(dirname "$0")/../../tests/clients/check-gpt2-export.py" "$WORK/e32" "$WORK/logits.safetensors" || fail "fp32 export check"
$PY "$(dirname "$0")/../../tests/clients/check-gpt2-export.py" "$WORK/e16" "$WORK/logits.safetensors" --bf16-of "$WORK/e32" ||
  fail "bf16 export check"
pass "GPT-2 safetensors export: logits match shardtrain's (fp32 within 1e-5, bf16 within its rounding)"

# (6) tensor-parallel targets, resumed on their mesh: from the resharded checkpoint and from the original.
for target in "4 2 2" "2 2 0"; do
  read -r w t z <<<"$target"
  name="tp_w${w}_t${t}_z${z}"
  "$RESHARD" "$SRC" --world "$w" --tp "$t" --zero-stage "$z" --out "$WORK/$name" >"$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; fail "reshard to $name"; }
  expect_verdict BITWISE "$WORK/$name/step_00000004/index.h5" "$SRC/index.h5" --group tensors
  mkdir -p "$WORK/${name}_direct" && cp -r "$WORK/src/checkpoints" "$WORK/${name}_direct/checkpoints"
  cp -r "$WORK/$name" "$WORK/${name}_via_ckpt"
  ftrain "$w" "$WORK/${name}_direct" --tp "$t" --zero-stage "$z" --steps 8 --ckpt-every 4 --resume auto
  ftrain "$w" "$WORK/${name}_via" --tp "$t" --zero-stage "$z" --steps 8 --ckpt-every 4 --resume auto \
    --ckpt-dir "$WORK/${name}_via_ckpt"
  grep -q "resumed from .*${name}_via_ckpt/step_00000004" "$WORK/${name}_via.log" || fail "$name: not resumed from the reshard"
  expect_verdict BITWISE "$WORK/${name}_via/params.h5" "$WORK/${name}_direct/params.h5"
  expect_verdict BITWISE "$WORK/${name}_via/steps.rank0.jsonl" "$WORK/${name}_direct/steps.rank0.jsonl"
  same_piece_layout "$WORK/$name/step_00000004" "$WORK/${name}_direct/checkpoints/step_00000008"
  "$RESHARD" "$WORK/$name" --world 4 --zero-stage 3 --out "$WORK/${name}_back" >/dev/null 2>&1 || fail "$name back to W=4"
  expect_verdict BITWISE "$WORK/${name}_back/step_00000004/index.h5" "$SRC/index.h5" --group tensors
  pass "--world $w --tp $t --zero-stage $z: resumed on that mesh bitwise as from the original, the trainer's own pieces, and back bitwise"
done
