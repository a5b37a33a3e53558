# Shared set-up for the end-to-end test scripts: strict mode, tool paths, a scratch folder,
# a small synthetic dataset, and check helpers that print what they compare.
# Usage (sourced): BIN_DIR=... WORK=... ; . common.sh
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
: "${BIN_DIR:?}" "${WORK:?}"
rm -rf "$WORK" && mkdir -p "$WORK"
DATA="$WORK/markov.h5"
"$BIN_DIR/data-prep" --synthetic markov --documents 20 --doc-tokens 4000 -o "$DATA" >/dev/null 2>&1
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
# checks NAME ARGS...: one of the tests' named checks and fixtures (checks.py --help lists them);
# a failed check prints one line saying why and exits 1.
checks() { python3 "$(dirname "${BASH_SOURCE[0]}")/checks.py" "$@"; }
# seconds_since START: seconds since START (date +%s%N), rounded to a tenth (e.g. 4.2).
seconds_since() {
  local ds=$(( ($(date +%s%N) - $1 + 50000000) / 100000000 ))
  echo "$((ds / 10)).$((ds % 10))"
}
# within_s SECONDS LIMIT: SECONDS (as seconds_since prints them) <= LIMIT (whole seconds).
within_s() { [ "${1/./}" -le $(( $2 * 10 )) ]; }
# train NP RUN_DIR [ddp-train options...]: a small model on the synthetic data.
train() {
  local np=$1 dir=$2; shift 2
  mpirun -np "$np" --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 \
    --peak-gflops 100 --log-every 1000 --run-dir "$dir" "$@" >"$dir.log" 2>&1 || { local rc=$?; cat "$dir.log" >&2; return $rc; }
}
# expect_verdict VERDICT equiv-check-args...: runs equiv-check, prints its verdict line, checks it.
expect_verdict() {
  local want=$1; shift
  local out rc=0
  out=$("$BIN_DIR/equiv-check" "$@" 2>&1) || rc=$?
  local got
  got=$(echo "$out" | grep '^verdict:' | head -1)
  echo "  equiv-check $* -> $got (exit $rc)"
  [[ "$got" == "verdict: $want"* ]] || { echo "$out" >&2; fail "expected $want"; }
}
# expect_exit2 WANT COMMAND ARGS...: COMMAND exits 2 (usage or input error) with WANT in its
# message; prints the command's last line.
expect_exit2() {
  local want=$1; shift
  local rc=0 msg
  msg=$("$@" 2>&1) || rc=$?
  echo "  $(basename "$1") ${*:2} -> exit $rc: $(echo "$msg" | tail -1)"
  [ "$rc" -eq 2 ] || fail "expected exit 2"
  echo "$msg" | grep -qF -- "$want" || fail "the message does not name $want"
}
# expect_exit CODE PATTERN command...: runs it, checks the exit code and that its output matches.
expect_exit() {
  local want=$1 pattern=$2; shift 2
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  echo "  $(basename "$1") ${*:2} -> exit $rc: $(echo "$out" | grep -E "$pattern" | head -1 | cut -c1-200)"
  [ "$rc" -eq "$want" ] && echo "$out" | grep -qE "$pattern" || { echo "$out" >&2; fail "expected exit $want and /$pattern/"; }
}
