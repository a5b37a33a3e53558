#!/usr/bin/env bash
# release-gate end to end (issues 16, 23): a seeded good candidate (two ranks, with all five
# evidence items made by the project's tools: its one-rank deterministic twin, the kill-and-resume
# proof, the W=1 -> W=2 scaling report, replica checks, data-prep's summary) is promoted over a
# registered unigram baseline with a positive expected utility, checked by hand from its record
# (the probability of regret replayed here, independently, from the recorded per-sequence losses);
# a policy that values nothing rejects it on utility alone; a cost table in the run folder is
# copied into the record; four bad candidates are each rejected for their own named reason and
# last-known-good never moves to them:
#   leak         trained with a cutoff after the evaluation's          -> trained_past_cutoff
#   slice        trained with owner bob's documents removed            -> slice_regression:owner=bob
#   calibration  the good checkpoint with ln_f scaled by 3 (logits x3) -> ece
#   no-proof     the good checkpoint without kill-and-resume evidence  -> evidence:kill_resume
# then `decide` is SIGKILLed at random points 20 times: every record stays whole JSON and the
# pointer always names an existing record. Unusable input exits 2.
# Usage: SCALE_LOGITS_HELPER=<build>/tests/scale_logits_helper release_gate.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"
repo="$(cd "$here/../.." && pwd)"
helper="${SCALE_LOGITS_HELPER:?set SCALE_LOGITS_HELPER to the built tests/scale_logits_helper}"
gate="$BIN_DIR/release-gate"

# Two owners with different Markov chains (alice: seed 1, bob: seed 2), one document a day from
# 2024-01-01 for each; alice's last three documents are version 2. Cutoff 2024-01-15: the hold-out
# is the documents of 2024-01-16 on (both owners, versions 1 and 2).
for s in 1 2; do
  "$BIN_DIR/data-prep" --synthetic markov --seed $s --documents 20 --doc-tokens 1500 -o "$WORK/m$s.h5" \
    --synthetic-jsonl "$WORK/m$s.jsonl" >/dev/null 2>&1
done
checks make-release-corpus "$WORK"
prep() { "$BIN_DIR/data-prep" "$1" -o "$2" --vocab 17 --tokenizer markov16 --separator 16; }
prep "$WORK/full.jsonl" "$WORK/full.h5" >"$WORK/data-prep.json" 2>/dev/null || fail "data-prep full"
prep "$WORK/nobob.jsonl" "$WORK/nobob.h5" >/dev/null 2>&1 || fail "data-prep nobob"
cutoff=2024-01-15T00:00:00Z
reg="$WORK/registry"
policy="$repo/scripts/release-policy.json"
gtrain() {  # gtrain RUN_DIR DATA CUTOFF [RANKS]: the candidates' training (default one rank), deterministic
  local dir=$1 data=$2 cut=$3 np=${4:-1}
  mkdir -p "$dir"
  DATA="$data" train "$np" "$dir" --d-model 32 --global-batch 8 --micro-batch 4 --steps 120 --lr 1e-2 --warmup 10 \
    --cutoff "$cut" --deterministic --check-replicas 40 --ckpt-every 120 --seed 1 || fail "training $dir"
}
evidence() {  # evidence RUN_DIR: the files the rubric reads, made by the project's own tools (pipeline evidence)
  local dir=$1 from=()
  # The W=1 twin is the scaling report's base for a two-rank run (a one-rank run has no E(W) to show).
  [ "$(jq -er .world_size "$dir/summary.json")" -eq 1 ] || from=(--scaling-from "$WORK/twin")
  # Exit 1 is the twin's verdict on a run that is not it (leak, slice): the file is written all the same.
  local rc=0
  "$BIN_DIR/pipeline" evidence "$dir" --bin "$BIN_DIR" --data-prep "$WORK/data-prep.json" --scaling "${from[@]}" \
    --twin "$dir/params.h5" "$WORK/twin/params.h5" >"$dir/evidence.log" 2>&1 || rc=$?
  [ $rc -le 1 ] && [ -s "$dir/evidence/scaling/report.json" ] && [ -s "$dir/evidence/equivalence.json" ] ||
    { cat "$dir/evidence.log"; fail "pipeline evidence $dir (exit $rc)"; }
  cp "$WORK/kill-resume.json" "$dir/evidence/kill-resume.json"
}
# The kill-and-resume proof, small: 2 SIGKILLs in 12 steps, final checkpoints bitwise equal.
"$repo/scripts/kill-resume-proof.sh" --bin "$BIN_DIR" --steps 12 --kills 2 --work "$WORK/proof" \
  --report "$WORK/kill-resume.json" >"$WORK/proof.log" 2>&1 || { cat "$WORK/proof.log"; fail "kill-resume-proof.sh"; }
gtrain "$WORK/good" "$WORK/full.h5" "$cutoff" 2
gtrain "$WORK/twin" "$WORK/full.h5" "$cutoff"       # the deterministic twin: the same job on one rank
gtrain "$WORK/leak" "$WORK/full.h5" 2024-01-25T00:00:00Z
gtrain "$WORK/slice" "$WORK/nobob.h5" "$cutoff"
for d in good leak slice; do evidence "$WORK/$d"; done
ck() { local d="$WORK/$1/checkpoints"; echo "$d/$(cat "$d/latest")"; }   # the run's newest checkpoint
fast_any=(--bootstrap-resamples 300 --latency-runs 5 --registry "$reg")   # without the policy
fast=("${fast_any[@]}" --policy "$policy")

# Unusable input: exit 2, nothing written.
rc=0; "$gate" decide "$(ck good)" "${fast[@]}" --baseline last-known-good >"$WORK/u.log" 2>&1 || rc=$?
[ $rc -eq 2 ] || { cat "$WORK/u.log"; fail "no last-known-good yet: exit $rc, expected 2"; }
grep -q "no last-known-good" "$WORK/u.log" || fail "the error does not say there is no last-known-good"
echo '{"format": "shardtrain-release-policy", "version": "x"}' >"$WORK/bad-policy.json"
rc=0; "$gate" decide "$(ck good)" --registry "$reg" --policy "$WORK/bad-policy.json" --baseline x >"$WORK/u.log" 2>&1 || rc=$?
[ $rc -eq 2 ] || { cat "$WORK/u.log"; fail "a policy without thresholds: exit $rc, expected 2"; }
pass "unusable input exits 2 (no last-known-good; a policy without thresholds)"

"$gate" baseline unigram --registry "$reg" --data "$WORK/full.h5" --cutoff "$cutoff" --order 1 --seq-len 32 \
  --max-samples 64 --bootstrap-resamples 300 >"$WORK/baseline.log" 2>&1 || { cat "$WORK/baseline.log"; fail "baseline"; }
pass "$(tail -1 "$WORK/baseline.log")"

# decide CKPT BASELINE EXPECTED_EXIT EXPECTED_REASON [extra options]
decide() {
  local ckpt=$1 base=$2 want=$3 reason=$4; shift 4
  local before rc=0
  before=$(cat "$reg/last-known-good" 2>/dev/null || echo none)
  "$gate" decide "$ckpt" "${fast[@]}" --baseline "$base" "$@" >"$WORK/decide.log" 2>&1 || rc=$?
  sed 's/^/    /' "$WORK/decide.log" | grep -E 'decision|reason|in service' | head -8
  [ $rc -eq "$want" ] || { cat "$WORK/decide.log"; fail "decide $ckpt: exit $rc, expected $want"; }
  if [ "$want" -eq 1 ]; then
    grep -q "reason: $reason" "$WORK/decide.log" || fail "decide $ckpt: no reason '$reason'"
    [ "$(cat "$reg/last-known-good" 2>/dev/null || echo none)" == "$before" ] || fail "last-known-good moved on a reject"
    grep -q "in service: last-known-good" "$WORK/decide.log" || fail "the reject does not name the fallback"
  fi
}
# A policy that values nothing: every other check passes, the expected utility is 0, not > 0.
checks make-no-value-policy "$policy" "$WORK/no-value-policy.json"
rc=0; "$gate" decide "$(ck good)" "${fast_any[@]}" --policy "$WORK/no-value-policy.json" --baseline unigram --dry-run \
  >"$WORK/novalue.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && [ "$(grep -c '^  reason: ' "$WORK/novalue.log")" -eq 1 ] && grep -q '^  reason: utility: ' "$WORK/novalue.log" ||
  { cat "$WORK/novalue.log"; fail "a policy valuing nothing: exit $rc, expected a reject for utility alone"; }
pass "a policy that values nothing rejects the good candidate for utility alone: $(grep -o 'expected utility[^:]*' "$WORK/novalue.log")"

decide "$(ck good)" unigram 0 "" --json "$WORK/good-record.json"
grep -q "$(ck good)" "$reg/last-known-good" || fail "last-known-good does not name the promoted checkpoint"
grep -q "^  utility of promoting over unigram: E = " "$WORK/decide.log" || fail "the decision prints no utility"
grep -q "^  costs: none" "$WORK/decide.log" || fail "without costs.json the decision does not say so"
# utility_check RECORD: the utility from the record's own inputs, by hand, and the probability of
# regret replayed from the per-sequence losses of both evaluations (bootstrap.hpp's draws in Python).
utility_check() { checks utility "$1"; }
line=$(utility_check "$WORK/good-record.json") || fail "the good candidate's utility does not check by hand"
checks promoted-record "$WORK/good-record.json" ||
  fail "the good candidate's record: not 5/5 evidence, positive utility, costs null"
pass "the good candidate is promoted over the unigram baseline with 5/5 evidence; last-known-good names it; $line"

# A cost table in the run folder (the pipeline's costs.json) goes into the record and the lines.
checks make-costs "$WORK/good/costs.json"
"$gate" decide "$(ck good)" "${fast[@]}" --baseline unigram --dry-run --json "$WORK/costs-record.json" \
  >"$WORK/costs.log" 2>&1 || true
grep -q "checkpoints 2000 B" "$WORK/costs.log" || { cat "$WORK/costs.log"; fail "the cost table is not in the decision's lines"; }
jq -e '.costs.stages[0].compute_core_s == 10.0' "$WORK/costs-record.json" >/dev/null || fail "the cost table is not in the record"
echo '{"format": "not-costs"}' >"$WORK/bad-costs.json"
rc=0; "$gate" decide "$(ck good)" "${fast[@]}" --baseline unigram --dry-run --costs "$WORK/bad-costs.json" \
  >"$WORK/u.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "bad-costs.json" "$WORK/u.log" || { cat "$WORK/u.log"; fail "a file that is no cost table: exit $rc, expected 2"; }
rm "$WORK/good/costs.json"
pass "RUN/costs.json is copied into the record and the decision; a file that is no cost table exits 2"

# A registry from before per-sequence losses: last-known-good's record without them is evaluated
# again from its checkpoint (a copy of the registry, so the records below stay as they are).
cp -r "$reg" "$WORK/old-registry"
checks strip-per-sequence "$WORK/old-registry"
rc=0; "$gate" decide "$(ck slice)" --bootstrap-resamples 300 --latency-runs 5 --policy "$policy" --registry "$WORK/old-registry" \
  --baseline last-known-good --dry-run >"$WORK/old.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "evaluating it again" "$WORK/old.log" && grep -q "^  utility of promoting over last-known-good" "$WORK/old.log" ||
  { cat "$WORK/old.log"; fail "a last-known-good record without per-sequence losses: exit $rc"; }
pass "a last-known-good recorded without per-sequence losses is evaluated again for the utility"

decide "$(ck leak)" last-known-good 1 "trained_past_cutoff"
pass "trained past the cutoff: rejected (trained_past_cutoff)"
decide "$(ck slice)" last-known-good 1 "slice_regression:owner=bob" --json "$WORK/slice-record.json"
line=$(utility_check "$WORK/slice-record.json") || fail "the slice candidate's utility does not check by hand"
jq -e '.utility.fallback == "last-known-good"' "$WORK/slice-record.json" >/dev/null || fail "the slice candidate's utility is not weighed against last-known-good"
pass "bob's documents removed from training: rejected (slice_regression:owner=bob), fallback last-known-good; $line"
"$helper" "$(ck good)" "$WORK/hot/checkpoints" 3 >/dev/null || fail "scale_logits_helper"
decide "$(ck hot)" last-known-good 1 "ece" --run-dir "$WORK/good"
pass "logits x 3: rejected (ece)"
decide "$(ck good)" last-known-good 1 "evidence:kill_resume" --evidence kill_resume="$WORK/nowhere.json"
pass "no kill-and-resume evidence: rejected (evidence:kill_resume)"
"$gate" history --registry "$reg" | sed 's/^/    /'
[ "$("$gate" history --registry "$reg" --json | jq length)" -eq 5 ] ||
  fail "history does not list the 5 records"

# --dry-run decides and writes nothing; eval --out writes the JSON, the Markdown and the diagram.
n=$(ls "$reg/records" | wc -l); lkg=$(cat "$reg/last-known-good")
rc=0; "$gate" decide "$(ck good)" "${fast[@]}" --baseline last-known-good --dry-run >"$WORK/dry.log" 2>&1 || rc=$?
[ $rc -le 1 ] && grep -q "^decision: " "$WORK/dry.log" || { cat "$WORK/dry.log"; fail "dry run: exit $rc, no decision"; }
[ "$(ls "$reg/records" | wc -l)" -eq "$n" ] && [ "$(cat "$reg/last-known-good")" == "$lkg" ] ||
  fail "--dry-run wrote a record or moved the pointer"
"$gate" eval "$(ck good)" --data "$WORK/full.h5" --cutoff "$cutoff" --max-samples 64 --bootstrap-resamples 300 \
  --latency-runs 5 --out "$WORK/eval" 2>"$WORK/eval.log" || { cat "$WORK/eval.log"; fail "eval --out"; }
for f in evaluation.json evaluation.md reliability.svg; do [ -s "$WORK/eval/$f" ] || fail "eval --out: no $f"; done
grep -q "owner=bob" "$WORK/eval/evaluation.md" || fail "evaluation.md lists no slices"
pass "--dry-run writes nothing; eval --out: $(grep -o 'loss [0-9.]* nats/token.*' "$WORK/eval.log" | head -1)"

# Kill decide at random points (seeded): records whole, pointer never dangling.
# decide's own duration: the shorter of two timed runs (the kills below must land inside a run).
shortest=1000000000000  # ns
for _ in 1 2; do
  start=$(date +%s%N); "$gate" decide "$(ck good)" "${fast[@]}" --baseline unigram >/dev/null 2>&1 || true
  took=$(( $(date +%s%N) - start )); if ((took < shortest)); then shortest=$took; fi
done
duration=$(printf '%d.%09d' $((shortest / 1000000000)) $((shortest % 1000000000)))
before=$(ls "$reg/records" | grep -c '\.json$')
for i in $(seq 1 20); do
  delay=$(checks kill-delay "$i" "$duration")  # odd kills anywhere in the run, even ones in its last fifth
  "$gate" decide "$(ck good)" "${fast[@]}" --baseline unigram >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
  checks registry-whole "$reg" || fail "kill $i: the registry is inconsistent"
done
"$gate" history --registry "$reg" >/dev/null || fail "history after the kills"
finished=$(( $(ls "$reg/records" | grep -c '\.json$') - before ))
torn=$(ls "$reg/records" | grep -c '\.tmp$' || true)
pass "20 SIGKILLs of decide at seeded random points in its $(printf %.2f "$duration") s ($finished finished first," \
  "$torn killed while writing a record): every record whole, last-known-good never dangling"
