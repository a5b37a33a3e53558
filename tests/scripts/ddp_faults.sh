#!/usr/bin/env bash
# Contract 6 end to end through ddp-train: (1) with skip-collective injected, every rank exits
# non-zero within timeout + 10 s and the flight records show the skipping rank one sequence number
# behind the others; (2) with a delay injected, the summary names that rank as the slowest;
# (3) an injection without --inject is impossible (the option is the only way in), and a bad
# spec is refused with exit 2.
#
# Usage: ddp_faults.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
. "$(dirname "$0")/common.sh"

# (1) Hang: rank 1 skips its first collective of step 2; 2 s timeout.
timeout_s=2
start=$(date +%s.%N)
rc=0
train 2 "$WORK/hang" --d-model 32 --steps 6 --global-batch 4 --micro-batch 2 --collective-timeout $timeout_s \
  --inject skip-collective:rank=1,step=2 2>/dev/null || rc=$?
elapsed=$(python3 -c "import time; print(round(time.time() - $start, 1))")
echo "  hang run: exit $rc after ${elapsed}s"
[ "$rc" -ne 0 ] || fail "the hung job exited 0"
python3 -c "import sys; sys.exit(0 if $elapsed <= $timeout_s + 10 else 1)" || fail "took ${elapsed}s > timeout + 10 s"
grep -q "collective timeout: AllReduce(seq=" "$WORK/hang.log" || { cat "$WORK/hang.log" >&2; fail "no timeout line naming the collective"; }
grep -m1 "collective timeout" "$WORK/hang.log"
for r in 0 1; do [ -s "$WORK/hang/flight.rank$r.json" ] || fail "rank $r wrote no flight record"; done
python3 - "$WORK/hang" <<'PY' || fail "flight records do not show rank 1 one sequence number behind"
import json, sys
d = sys.argv[1]
def last_started(r):
    rec = json.load(open(f"{d}/flight.rank{r}.json"))
    assert rec["timed_out_group"] == "dp", f"rank {r}: timed_out_group {rec['timed_out_group']}"
    g = [g for g in rec["groups"] if g["name"] == "dp"][0]
    return g["last_started_seq"]
s0, s1 = last_started(0), last_started(1)
print(f"  flight records: rank 0 last started seq {s0}, rank 1 {s1}")
sys.exit(0 if s1 == s0 - 1 else 1)
PY
pass "skip-collective: all ranks exit non-zero within timeout + 10 s, rank 1 one behind"

# (2) Straggler: rank 1 sleeps 150 ms per step.
train 2 "$WORK/straggler" --d-model 32 --steps 8 --global-batch 4 --micro-batch 2 --inject delay:rank=1,ms=150
slowest=$(python3 -c "import json; print(json.load(open('$WORK/straggler/summary.json'))['slowest_rank'])")
echo "  straggler run: summary slowest_rank = $slowest"
[ "$slowest" = 1 ] || fail "the delayed rank 1 is not named slowest"
pass "delay: the summary names rank 1 as the slowest"

# (3) A malformed injection spec is refused with exit 2.
rc=0
train 2 "$WORK/badspec" --d-model 32 --steps 2 --global-batch 4 --micro-batch 2 --inject skip-collective:rank=x 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "a malformed --inject exited $rc, expected 2"
pass "malformed --inject refused with exit 2"
