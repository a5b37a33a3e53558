#!/usr/bin/env bash
# Benchmark (not a test): "hang-diagnose reads 8 dumps of 2,000 entries each in under a second".
# Generates 8 flight records (format_version 3) of 2,000 entries each in a temporary directory with
# python3 (two groups, dp and tp, 1,000 entries each; rank 5 one collective behind in dp, so the
# whole analysis runs), times `hang-diagnose --json` on them and prints the seconds (best of 3).
#
# Usage: scripts/bench-hang-diagnose.sh [BIN_DIR]   (default: build/bin)
set -euo pipefail
BIN_DIR=${1:-build/bin}
TOOL="$BIN_DIR/hang-diagnose"
[ -x "$TOOL" ] || { echo "no $TOOL (build the hang-diagnose target, or pass BIN_DIR)" >&2; exit 2; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

python3 - "$DIR" <<'PY'
import json, sys
out, world, per_group = sys.argv[1], 8, 1000
t0 = 1.7e9
for rank in range(world):
    groups = []
    for gi, name in enumerate(["dp", "tp"]):
        behind = rank == 5 and name == "dp"
        in_flight = name == "dp"  # dp's last collective is in flight (or, on rank 5, not submitted)
        last = per_group - (1 if behind else 0)
        entries = []
        for seq in range(1, per_group + 1):
            state = "completed" if seq < per_group or not in_flight else ("started" if not behind else None)
            if state is None:
                continue
            t = t0 + seq * 0.1 + gi * 0.01
            entries.append({"id": seq * 2 + gi, "seq": seq, "op": "AllReduce", "group": name, "dtype": "float32",
                            "numel": 4096, "bytes": 16384, "root": -1, "step": seq // 10, "phase": "backward",
                            "state": state, "t_enqueue": t, "t_start": t,
                            "t_end": t + 0.05 if state == "completed" else None})
        groups.append({"name": name, "rank": rank, "size": world, "world_ranks": list(range(world)), "phase": None,
                       "last_enqueued_seq": last, "last_started_seq": last, "last_completed_seq": per_group - (1 if in_flight else 0),
                       "capacity": 2048, "dropped": 0, "entries": entries})
    dump = {"format": "shardtrain-flight-record", "format_version": 3, "job_id": "bench", "rank": rank,
            "world_size": world, "hostname": "h", "pid": 1, "code_version": "bench",
            "reason": "signal" if rank == 5 else "timeout", "dumped_at": t0 + 500,
            "timed_out_group": None if rank == 5 else "dp", "trigger": None, "triggers": [],
            "now": {"phase": "data", "step": 99, "since": t0 + 99}, "phases": [], "groups": groups}
    json.dump(dump, open(f"{out}/flight.rank{rank}.json", "w"))
PY

best=""
for _ in 1 2 3; do
  start=$(date +%s.%N)
  "$TOOL" --json "$DIR" >/dev/null || [ $? -eq 1 ]  # exit 1: the planted hang was found
  end=$(date +%s.%N)
  s=$(python3 -c "print(f'{$end - $start:.3f}')")
  best=$(python3 -c "print(min(float('$s'), float('${best:-1e9}')))")
done
echo "hang-diagnose --json: 8 dumps x 2000 entries: ${best} s (best of 3)"
