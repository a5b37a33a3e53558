#!/usr/bin/env bash
# The Hugging Face export folder as a transformers user meets it (issue 25):
#  (1) a small byte-level model is trained with a temporal hold-out; ckpt-reshard --export hf writes
#      model.safetensors, config.json, generation_config.json, the tokenizer files and README.md, and
#      no file holds an absolute local path (the work folder's path appears in none);
#  (2) refusals write nothing (exit 2): an existing --out, a --data of another dataset, an unknown
#      --export format;
#  (3) the model card names the data snapshot and cutoff, the layout, and the release decision and
#      hold-out figures from a --registry that has a record of the checkpoint;
#  (4) tests/clients/check-hf-export.py under torch + transformers (scripts/python-env.sh): loads with no
#      warning, pipeline("text-generation") generates, generation stays within the context, the
#      hold-out loss equals the trainer's within 1e-6 relative, 1,000 random UTF-8 strings round-trip.
# Without torch + transformers (python-env.sh cannot install them) (1)-(3) run and the test reports
# itself skipped (exit 77) with the reason.
#
# Usage: hf_export.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
RESHARD="$BIN_DIR/ckpt-reshard"

# (1) Documents: 2024 ones train, 2025 ones are the hold-out (cutoff 2024-12-31); one owner.
checks make-dated-docs "$WORK/docs.jsonl" "$WORK/holdout_docs.json"
"$BIN_DIR/data-prep" "$WORK/docs.jsonl" -o "$WORK/docs.h5" >/dev/null 2>&1 || fail "data-prep"
M=(--seq-len 32 --layers 2 --heads 2 --d-model 32 --global-batch 4 --micro-batch 2 --cutoff 2024-12-31T00:00:00Z
   --eval-samples 16 --peak-gflops 100 --log-every 1000)
mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" --data "$WORK/docs.h5" "${M[@]}" --steps 30 --ckpt-every 30 \
  --run-dir "$WORK/run" >"$WORK/run.log" 2>&1 || { cat "$WORK/run.log" >&2; fail "ddp-train"; }
CKPT="$WORK/run/checkpoints/step_00000030"
"$RESHARD" "$CKPT" --export hf --out "$WORK/hf" 2>&1 | grep exported || fail "export"
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json \
         special_tokens_map.json README.md; do
  [ -s "$WORK/hf/$f" ] || fail "the export has no $f"
done
ls "$WORK/hf" | tr '\n' ' '; echo
[ "$(ls -A "$WORK" | grep -c '\.tmp\.')" = 0 ] || fail "a temporary folder was left beside the export"
grep -rlF "$WORK" "$WORK/hf" && fail "a file of the export holds the local path $WORK"
grep -rlF "$(cd "$WORK" && pwd -P)" "$WORK/hf" && fail "a file of the export holds the local path"
pass "export folder: 7 files, no local path in any of them"
checks hf-config "$WORK/hf" --context 32 --vocab 256 || fail "config checks"
pass "config, generation config and tokenizer describe the dataset's separator and the context"

# (2) Refusals write nothing.
expect_exit 2 "exists" "$RESHARD" "$CKPT" --export hf --out "$WORK/hf"
"$BIN_DIR/data-prep" --synthetic markov --documents 3 --doc-tokens 100 -o "$WORK/other.h5" >/dev/null 2>&1
expect_exit 2 "dataset snapshot" "$RESHARD" "$CKPT" --export hf --data "$WORK/other.h5" --out "$WORK/hf_other"
expect_exit 2 "not a format" "$RESHARD" "$CKPT" --export onnx --out "$WORK/hf_onnx"
[ ! -e "$WORK/hf_other" ] && [ ! -e "$WORK/hf_onnx" ] || fail "a refused export left files"
[ "$(ls -A "$WORK" | grep -c '\.tmp\.')" = 0 ] || fail "a refused export left a temporary folder"
"$RESHARD" "$CKPT" --export safetensors --out "$WORK/alias" >/dev/null 2>&1 || fail "--export safetensors (alias) into a folder"
cmp "$WORK/hf/model.safetensors" "$WORK/alias/model.safetensors" || fail "the alias writes other weights"
mkdir "$WORK/old"
"$RESHARD" "$CKPT" --export safetensors --out "$WORK/old/model.safetensors" >/dev/null 2>&1 || fail "--out FILE.safetensors"
[ -s "$WORK/old/config.json" ] && [ -s "$WORK/old/tokenizer.json" ] || fail "--out FILE.safetensors: no files beside it"
pass "refusals (existing --out, another dataset, unknown format) write nothing; safetensors alias and FILE form"

# (3) The model card, with a release record.
grep -q "$(jq -er .data_snapshot_id "$WORK/run/summary.json" 2>/dev/null || echo nothing)" \
  "$WORK/hf/README.md" 2>/dev/null || grep -q "data selection snapshot id" "$WORK/hf/README.md" || fail "card: no snapshot id"
grep -q "2024-12-31T00:00:00Z" "$WORK/hf/README.md" || fail "card: no cutoff"
grep -q "| 2 | 2 | 1 | 0 | 2 |" "$WORK/hf/README.md" || fail "card: no layout row (world 2, dp 2, tp 1, ZeRO 0, 2 files)"
grep -q "No release record" "$WORK/hf/README.md" || fail "card: says nothing about the release"
"$BIN_DIR/release-gate" baseline unigram --registry "$WORK/registry" --data "$WORK/docs.h5" \
  --cutoff 2024-12-31T00:00:00Z --order 1 --seq-len 32 >"$WORK/baseline.log" 2>&1 || { cat "$WORK/baseline.log" >&2; fail "baseline"; }
rc=0; "$BIN_DIR/release-gate" decide "$CKPT" --registry "$WORK/registry" --policy "$ROOT/scripts/release-policy.json" \
  --baseline unigram >"$WORK/decide.log" 2>&1 || rc=$?
[ "$rc" -le 1 ] || { cat "$WORK/decide.log" >&2; fail "release-gate decide exit $rc"; }
"$RESHARD" "$CKPT" --export hf --registry "$WORK/registry" --out "$WORK/hf_card" 2>&1 | grep exported || fail "export --registry"
grep -E "Release decision: \*\*(promote|reject)\*\*" "$WORK/hf_card/README.md" || { cat "$WORK/decide.log" >&2; fail "card: no release decision"; }
grep -E "^Hold-out .* loss [0-9.]+ nats/token" "$WORK/hf_card/README.md" | cut -c1-200 || fail "card: no hold-out figures"
grep -rlF "$WORK" "$WORK/hf_card" && fail "the card holds the local path $WORK"
pass "model card: snapshot, cutoff, layout; the release decision and hold-out figures from --registry"

# (4) transformers.
PY=$("$ROOT/scripts/python-env.sh") || { echo "SKIPPED: torch + transformers unavailable (scripts/python-env.sh said why above)"; exit 77; }
checks make-holdout-spec "$WORK/run/summary.json" "$WORK/holdout_docs.json" "$WORK/holdout.json" --seq-len 32 ||
  fail "hold-out description"
"$PY" "$ROOT/tests/clients/check-hf-export.py" "$WORK/hf" "$WORK/holdout.json" || fail "transformers checks"
pass "transformers uses the export folder as it is"
