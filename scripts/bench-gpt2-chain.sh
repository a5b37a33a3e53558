#!/usr/bin/env bash
# The rest of the chain at GPT-2 small (124M parameters, --model gpt2-small; issue 46), each step
# timed as a user runs it (the whole command, MPI start-up included), on a synthetic corpus at
# GPT-2's vocabulary (8 documents of 3,000 tokens; the last two, after the cutoff, the hold-out):
#   train     ddp-train and fsdp-train --zero-stage 3 on 2 ranks, 1 step of global batch 4 (so 4
#             ranks can resume it), a checkpoint each (1.5 GB);
#   reshard   DDP 2 -> 4 ranks, ZeRO-3 -> DDP, DP2 -> TP2 (ckpt-reshard, validation included), and
#             equiv-check of each against its source (every tensor compared: BITWISE expected);
#   export    --export hf, then transformers loads the folder as GPT2LMHeadModel and its logits on a
#             (1, 1024) batch are compared with shardtrain's own (tests/model_logits_helper) within
#             1e-5 relative (tests/scripts/hf_gpt2_fixture.py logits);
#   import    a random GPT2LMHeadModel that transformers made at GPT-2 small's config (no download)
#             imported with --import hf --model gpt2-small and fine-tuned 1 step on 2 ranks;
#   gate      release-gate eval of the DDP checkpoint on the hold-out (latency per token);
#   restart   kill-resume-proof --model gpt2-small on 2 ranks: 4 kills, one during a save, BITWISE,
#             with each restart's seconds (relaunch to the first resumed step, restarts.json).
# Needs torch + transformers for export/import (scripts/python-env.sh; those two are skipped with
# the reason without them), about 12 GB of disk and 8 GB of memory; 10-15 minutes on 2 cores.
#
# Usage: [KEEP=DIR] scripts/bench-gpt2-chain.sh [train reshard export import gate restart]
#        (default: all; reshard, export and gate need train's checkpoints in the same run)
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
work="${KEEP:-$tmp}"
mkdir -p "$work"
parts=("${@:-train reshard export import gate restart}")
wants() { [[ " ${parts[*]} " == *" $1 "* ]]; }
helper="$build/tests/model_logits_helper"
rows=()
# timed NAME COMMAND...: runs COMMAND with its output in $work/NAME.log; adds "NAME seconds" to rows.
timed() {
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$work/$name.log" 2>&1 || { echo "bench-gpt2-chain: $name failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  rows+=("$name $(calc "$t1 - $t0")")
  echo "  $name: $(calc "$t1 - $t0") s"
}
data="$work/gpt2-vocab.h5"
cutoff=2024-01-06T12:00:00Z  # documents k are dated 2024-01-01 + k days: 0-5 train, 6-7 hold-out
"$build/bin/data-prep" --synthetic markov --symbols 50256 --documents 8 --doc-tokens 3000 -o "$data" >/dev/null
M=(--data "$data" --cutoff "$cutoff" --model gpt2-small --micro-batch 1 --global-batch 4 --threads 1 --log-every 1
   --eval-samples 2)
ddp_ckpt="$work/ddp/checkpoints/step_00000001" z3_ckpt="$work/z3/checkpoints/step_00000001"

if wants train; then
  timed train-ddp mpirun -np 2 "$build/bin/ddp-train" "${M[@]}" --steps 1 --ckpt-every 1 --run-dir "$work/ddp"
  timed train-zero3 mpirun -np 2 "$build/bin/fsdp-train" --zero-stage 3 "${M[@]}" --steps 1 --ckpt-every 1 \
    --run-dir "$work/z3"
fi
if wants reshard; then
  timed reshard-ddp2-to-4 "$build/bin/ckpt-reshard" "$ddp_ckpt" --world 4 --out "$work/r4"
  timed equiv-ddp2-vs-4 "$build/bin/equiv-check" "$ddp_ckpt" "$work/r4/step_00000001"
  timed reshard-zero3-to-ddp "$build/bin/ckpt-reshard" "$z3_ckpt" --world 2 --zero-stage 0 --out "$work/rz"
  timed equiv-zero3-vs-ddp "$build/bin/equiv-check" "$z3_ckpt" "$work/rz/step_00000001"
  timed reshard-dp2-to-tp2 "$build/bin/ckpt-reshard" "$ddp_ckpt" --world 2 --tp 2 --out "$work/rt"
  timed equiv-dp2-vs-tp2 "$build/bin/equiv-check" "$ddp_ckpt" "$work/rt/step_00000001"
  for v in equiv-ddp2-vs-4 equiv-zero3-vs-ddp equiv-dp2-vs-tp2; do
    grep -q '^verdict: BITWISE' "$work/$v.log" || { cat "$work/$v.log" >&2; echo "bench-gpt2-chain: $v not BITWISE" >&2; exit 1; }
  done
  rm -rf "$work/r4" "$work/rz" "$work/rt"
fi
py=""
if wants export || wants import; then
  py=$("$here/scripts/python-env.sh") || { echo "  export/import skipped: torch + transformers unavailable"; py=""; }
fi
if wants export && [ -n "$py" ]; then
  timed export-hf "$build/bin/ckpt-reshard" "$ddp_ckpt" --export hf --out "$work/hf"
  "$helper" "$ddp_ckpt" "$work/logits.safetensors" 1 >/dev/null
  timed transformers-logits "$py" "$here/tests/scripts/hf_gpt2_fixture.py" logits "$work/hf" "$work/logits.safetensors"
  grep logits "$work/transformers-logits.log" | sed 's/^/  /'
fi
if wants import && [ -n "$py" ]; then
  "$py" "$here/tests/scripts/hf_gpt2_fixture.py" make-shape "$work/gpt2" 12 768 12 1024 >/dev/null
  timed import-hf "$build/bin/ckpt-reshard" --import hf "$work/gpt2" --model gpt2-small --out "$work/imp"
  timed finetune-imported mpirun -np 2 "$build/bin/ddp-train" "${M[@]}" --steps 1 --resume "$work/imp/step_00000000" \
    --run-dir "$work/ft"
  grep -q "fine-tuning from" "$work/finetune-imported.log" || { echo "bench-gpt2-chain: no fine-tune" >&2; exit 1; }
  rm -rf "$work/gpt2" "$work/imp" "$work/ft"
fi
if wants gate; then
  timed release-gate-eval "$build/bin/release-gate" eval "$ddp_ckpt" --data "$data" --cutoff "$cutoff" \
    --summary "$work/ddp/summary.json" --latency-runs 5 --json "$work/evaluation.json"
  jq -c '{holdout_loss: .scores.loss, sequences: .scores.sequences, seconds, evaluated_tokens_per_s,
          latency_ms_p50: .latency.ms_per_sequence_p50, forward_tokens_per_s: .latency.forward_tokens_per_s}' \
    "$work/evaluation.json" | sed 's/^/  /'
fi
if wants restart; then
  timed kill-resume-proof "$build/bin/kill-resume-proof" --model gpt2-small --np 2 --steps 8 --ckpt-every 2 --kills 4 \
    --save-kills 1 --global-batch 2 --pace-ms 0 --work "$work/proof"
  grep -E "BITWISE|holds|restart" "$work/kill-resume-proof.log" | tail -5 | sed 's/^/  /'
  jq -c "[.restarts[] | .restart_s]" "$work/proof/restarts.json" 2>/dev/null | sed 's/^/  restart seconds: /'
  rm -rf "$work/proof/run/checkpoints" "$work/proof/ref/checkpoints"
fi
printf '%s\n' "${rows[@]}" | awk '{ printf "| %s | %.1f |\n", $1, $2 }'
