#!/usr/bin/env bash
# The Slurm scripts without a cluster: exclude-node.sh forms the right scontrol commands (a fake
# scontrol in PATH records them), the usage errors of exclude-node.sh, train.sbatch, the pipeline tool
# and its cycles, and the --help of each naming its variables and options. The real cluster test is
# tests/scripts/slurm_chain.sh.
#
# Usage: slurm_scripts.sh BIN_DIR WORK_DIR
set -euo pipefail
WORK=$2
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rm -rf "$WORK" && mkdir -p "$WORK/fake"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# A fake scontrol: `show job` prints a job with the ExcNodeList given in FAKE_EXC; every call is logged.
cat >"$WORK/fake/scontrol" <<'EOF'
#!/bin/sh
echo "scontrol $*" >>"$FAKE_LOG"
[ "$1" = show ] && echo "JobId=$3 JobName=train JobState=RUNNING ExcNodeList=$FAKE_EXC NodeList=n[1-4]"
exit 0
EOF
chmod +x "$WORK/fake/scontrol"
export FAKE_LOG="$WORK/calls.log"
for exc in "(null)" "n7,n9" "n7,n3"; do  # the last: n3 already excluded (a second verdict on it) is not listed twice
  : >"$FAKE_LOG"
  FAKE_EXC=$exc SLURM_JOB_ID=42 PATH="$WORK/fake:$PATH" "$repo/scripts/slurm/exclude-node.sh" n3 5 2>"$WORK/err"
  case "$exc" in "(null)") want_list=n3 ;; *n3*) want_list=$exc ;; *) want_list="$exc,n3" ;; esac
  printf 'scontrol show job 42\nscontrol requeuehold 42\nscontrol update JobId=42 ExcNodeList=%s StartTime=now\nscontrol release 42\n' "$want_list" >"$WORK/want"
  diff "$WORK/want" "$FAKE_LOG" || fail "exclude-node.sh n3 5 (excluded before: $exc): other scontrol calls"
  grep -q "job 42: excluding n3 (rank 5)" "$WORK/err" || fail "exclude-node.sh did not say what it does"
  echo "  excluded before '$exc': $(tr '\n' ';' <"$FAKE_LOG")"
done
pass "exclude-node.sh: requeuehold, ExcNodeList += HOST (keeping the earlier ones), release"

expect_exit() {  # expect_exit CODE MESSAGE-REGEX COMMAND...
  local want=$1 re=$2 rc=0; shift 2
  "$@" >"$WORK/out" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] && grep -qE -e "$re" "$WORK/out" || { cat "$WORK/out" >&2; fail "$* exited $rc (want $want, /$re/)"; }
  echo "  $(basename "$1") ${*:2} -> exit $rc: $(grep -E -e "$re" "$WORK/out" | head -1 | cut -c1-120)"
}
expect_exit 2 "usage: exclude-node.sh HOST" "$repo/scripts/slurm/exclude-node.sh"
expect_exit 2 "not inside a Slurm job" env -u SLURM_JOB_ID "$repo/scripts/slurm/exclude-node.sh" n1
expect_exit 2 "not inside a Slurm job: submit it with sbatch" env -u SLURM_JOB_ID "$repo/scripts/slurm/train.sbatch"
expect_exit 0 "LAUNCHER +srun \(default\) or mpirun" "$repo/scripts/slurm/train.sbatch" --help
for v in SHARDTRAIN_HOME SHARDTRAIN_BIN RUN_DIR DATA STEPS SEQ_LEN MODEL CKPT_EVERY DEVICE TRAINER TRAIN_ARGS MIN_RANKS SAVE_WAIT; do
  grep -qE "^#   $v " "$repo/scripts/slurm/train.sbatch" || fail "train.sbatch's header does not document $v"
done
# The pipeline tool (its option checks and stage graph are unit-tested: test_pipeline_graph.cpp).
expect_exit 2 "--input, --cutoff and --name are required" "$1/pipeline" --name x
expect_exit 2 "--np must be a positive whole number" "$1/pipeline" --input a --cutoff b --name c --np 0
expect_exit 2 "unknown stage 'nope' \\(prep proof baseline twin equiv train report decide costs\\)" \
  "$1/pipeline" --input a --cutoff b --name c --root "$WORK/p" --stage nope
expect_exit 2 "not expected: .*--bogus" "$1/pipeline" --bogus 1
expect_exit 2 "--sbatch" "$1/pipeline" --sbatch
expect_exit 0 "--sbatch" "$1/pipeline" --help
expect_exit 2 "sbatch not found: run on a Slurm login node, or use --local" \
  env PATH=/nonexistent "$1/pipeline" --input a --cutoff b --name c --root "$WORK/p"
expect_exit 2 "not a folder" "$1/release-gate" costs "$WORK/none"
# The continual cycles (their options, graph and plans are unit-tested: test_pipeline_cycles.cpp).
expect_exit 2 "--input, --snapshots, --holdout-s and --work are required" "$1/pipeline" cycles --input a
expect_exit 2 "--holdout-s must be a positive whole number" "$1/pipeline" cycles --input a --snapshots b --work c --holdout-s 0
expect_exit 2 "--snapshots: 'soon' is not a time" "$1/pipeline" cycles --input a --snapshots soon --work "$WORK/cy" --holdout-s 1
expect_exit 2 "not expected: .*--bogus" "$1/pipeline" cycles --bogus 1
expect_exit 2 "--np is an option of the release chain, not of 'cycles'" "$1/pipeline" --np 2 cycles --input a
expect_exit 2 "--slurm: sbatch not found" env PATH=/nonexistent "$1/pipeline" cycles --input a --holdout-s 1 \
  --snapshots 2024-01-07T00:00:00Z --work "$WORK/cy" --slurm
expect_exit 0 "--slurm" "$1/pipeline" cycles --help
pass "usage errors exit 2 with a line naming the problem; --help lists the variables and options"
