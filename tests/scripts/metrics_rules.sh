#!/usr/bin/env bash
# The alert rules shipped for Prometheus (deploy/prometheus/shardtrain.rules.yml): promtool checks
# them, and runs their unit tests (shardtrain.rules.test.yml: each alert fires on the condition
# it names and not on a healthy rank); a rules file with a broken expression is refused with a
# message naming the file (the negative control of the check).
# Usage: metrics_rules.sh BIN_DIR WORK_DIR
set -euo pipefail
WORK=$2
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
command -v promtool >/dev/null ||
  { echo "SKIPPED: metrics_rules needs promtool (Debian: prometheus; scripts/setup.sh installs it)"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK"
rules="$repo/deploy/prometheus/shardtrain.rules.yml"
promtool check rules "$rules"
(cd "$repo/deploy/prometheus" && promtool test rules shardtrain.rules.test.yml)
sed 's/> ignoring (comm_group, seq, op) group_left/> ignoring (comm_group, seq, op) group_left (/' "$rules" >"$WORK/broken.rules.yml"
rc=0
out=$(promtool check rules "$WORK/broken.rules.yml" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q "broken.rules.yml" <<<"$out" ||
  { echo "$out" >&2; echo "FAIL: promtool accepted a rules file with a broken expression (exit $rc)" >&2; exit 1; }
echo "ok: a broken rules file is refused (exit $rc): $(grep -m1 "broken.rules.yml:" <<<"$out" | cut -c1-160)"
# Every alert names a runbook section that exists (GitHub's heading anchors: lower case, spaces to
# dashes, punctuation dropped).
python3 - "$rules" "$repo/docs/RUNBOOK.md" <<'PY'
import re, sys
rules, runbook = open(sys.argv[1]).read(), open(sys.argv[2]).read()
anchors = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", runbook, re.M)}
named = re.findall(r'runbook: "docs/RUNBOOK.md#([^"]+)"', rules)
alerts = re.findall(r"- alert: (\S+)", rules)
missing = [a for a in named if a not in anchors]
if len(named) != len(alerts) or missing:
    sys.exit(f"FAIL: {len(alerts)} alerts, {len(named)} runbook annotations; sections missing from RUNBOOK.md: {missing}")
print(f"ok: each of the {len(alerts)} alerts names a RUNBOOK.md section that exists")
PY
