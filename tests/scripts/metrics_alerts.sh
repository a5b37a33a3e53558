#!/usr/bin/env bash
# The live-metrics proof (issue 49): a real Prometheus and a real Alertmanager (Debian's), started
# here on free loopback ports with their own data folders, Prometheus discovering the job's ranks
# from the run folders' prometheus-targets.json (linked into one folder) and evaluating deploy/prometheus/shardtrain.rules.yml
# (1 s scrapes and evaluations), on 2-rank ddp-train runs with --metrics-port:
#   A. control: every rank's series is in Prometheus with its host label; the discovery file
#      names every rank's port and labels; no alert of the run, pending or firing, while it runs;
#   B. rank 1 hangs at the start of a step (--inject hang:...,phase=data): rank 0 waits in the
#      step's first collective, and ShardtrainCollectiveInFlight naming rank 0, its host and the
#      collective is firing in Prometheus and received by Alertmanager before the collective
#      timeout (the job is still running and rank 0 has written no timeout record yet);
#   C. rank 1 stopped with SIGSTOP: ShardtrainTrainerStuck names rank 1 and its host;
#   D. a metrics port in use: the trainer, and run-resilient, exit 2 at start with one line naming
#      the address;
#   E. rank 1 sleeps 60 ms in its data phase (a real straggler, live checks every 10 steps):
#      ShardtrainStraggler for rank 1 in data is pending in Prometheus (its `for:` is 10 minutes)
#      and no other straggler alert of the run is (the naming rules drop rank 0's noise);
#   F. run-resilient --metrics-port over a job whose rank 1 is killed in the first attempt: while
#      the restart runs, Prometheus has the launcher's series from its own discovery file: 1
#      restart, 2 ranks, the failed attempt's exit status, the verdict dead-rank naming rank 1 and
#      the host.
# The servers are stopped by pid (trap), and bounded by `timeout` so that a killed test (a ctest
# timeout KILLs, no trap runs) leaves nothing behind for long; a later run stops what an earlier,
# killed one left (pid files in the work folder).
#
# Usage: metrics_alerts.sh BIN_DIR WORK_DIR
BIN_DIR=$1 WORK=$2
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for tool in prometheus prometheus-alertmanager curl; do
  command -v "$tool" >/dev/null ||
    { echo "SKIPPED: metrics_alerts needs $tool (Debian: prometheus, prometheus-alertmanager, curl; scripts/setup.sh installs them)"; exit 77; }
done
for pidfile in "$WORK"/*.pid; do  # servers of an earlier run that was killed
  [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
done
. "$repo/tests/scripts/common.sh"
WORK=$(cd "$WORK" && pwd)
host=$(hostname)
t_start=$SECONDS

read -r prom_port am_port < <(checks free-ports 2)
prom="http://127.0.0.1:$prom_port" am="http://127.0.0.1:$am_port"
mkdir -p "$WORK/runs" "$WORK/targets" "$WORK/prometheus-data" "$WORK/alertmanager-data"
cat >"$WORK/alertmanager.yml" <<EOT
route: {receiver: keep, group_wait: 1s, group_interval: 1s, repeat_interval: 1h}
receivers: [{name: keep}]
EOT
cat >"$WORK/prometheus.yml" <<EOT
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: ["$repo/deploy/prometheus/shardtrain.rules.yml"]
alerting:
  alertmanagers: [{static_configs: [{targets: ["127.0.0.1:$am_port"]}]}]
scrape_configs:
  - job_name: shardtrain
    honor_labels: true
    file_sd_configs: [{files: ["$WORK/targets/*.json"], refresh_interval: 1s}]
EOT
promtool check config "$WORK/prometheus.yml" >/dev/null || fail "promtool rejects the test's prometheus.yml"

pids=()
cleanup() {
  local rc=$?
  set +e
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -f "$WORK"/*.pid
  ((rc == 0)) || { echo "--- prometheus log"; tail -20 "$WORK/prometheus.log"; echo "--- alertmanager log"; tail -20 "$WORK/alertmanager.log"; } >&2
  echo "metrics_alerts: $((SECONDS - t_start)) s in all"
  exit "$rc"
}
trap cleanup EXIT
# start NAME COMMAND...: a server in the background, its pid kept for the trap and in NAME.pid.
start() {
  local name=$1; shift
  timeout 600 "$@" >"$WORK/$name.log" 2>&1 &
  pids+=($!)
  echo $! >"$WORK/$name.pid"
}
start alertmanager prometheus-alertmanager --config.file="$WORK/alertmanager.yml" --storage.path="$WORK/alertmanager-data" \
  --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address=
start prometheus prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prometheus-data" \
  --web.listen-address="127.0.0.1:$prom_port"
for url in "$prom/-/ready" "$am/-/ready"; do
  for _ in $(seq 60); do curl -sf "$url" >/dev/null && break; sleep 0.5; done
  curl -sf "$url" >/dev/null || fail "$url is not ready after 30 s"
done
pass "Prometheus on $prom, Alertmanager on $am"

# job NAME PORT STEPS TIMEOUT [options...]: a 2-rank run in the background (its mpirun pid in $job_pid);
# JOB_DELAY replaces the pacing below, JOB_LOG_EVERY the progress lines (each a live straggler check).
# every rank sleeps 40 ms per step (--inject delay:rank=all), so a step takes about that long on any
# machine and no rank is a straggler (a delay on one rank would be one, and ShardtrainStraggler
# would rightly go pending in the control run).
job() {
  local name=$1 port=$2 steps=$3 timeout=$4; shift 4
  mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 \
    --peak-gflops 100 --log-every "${JOB_LOG_EVERY:-1000}" --global-batch 8 --micro-batch 2 --steps "$steps" --collective-timeout "$timeout" \
    --inject "${JOB_DELAY:-delay:rank=all,ms=40}" --metrics-port "$port" --run-dir "$WORK/runs/$name" "$@" >"$WORK/$name.log" 2>&1 &
  job_pid=$!
  pids+=("$job_pid")
  # Discovery globs only in a path's last element: one link per run folder (docs/RUNBOOK.md).
  ln -s "$WORK/runs/$name/prometheus-targets.json" "$WORK/targets/$name.json"
}

echo "A. control run"
port=$(checks free-port-run 2)
job control "$port" 250 30
checks prom-series "$prom" "$WORK/runs/control" 2 "$host" 30
checks metrics-targets "$WORK/runs/control" 2 "$port" "$host"
# The page is read whole before it is searched: `curl | grep -q` under pipefail fails when grep
# stops at its first match and curl, still writing, gets SIGPIPE (seen once in a fresh-clone run).
page=$(curl -sf "http://127.0.0.1:$((port + 1))/metrics") || fail "rank 1's endpoint does not answer"
grep -q '^shardtrain_loss{' <<<"$page" || fail "rank 1's endpoint serves no shardtrain_loss"
while kill -0 "$job_pid" 2>/dev/null; do
  checks no-alerts "$prom" "$am" "$WORK/runs/control" >/dev/null || { kill "$job_pid"; fail "an alert of the control run"; }
  sleep 1
done
wait "$job_pid" || { cat "$WORK/control.log" >&2; fail "the control run failed"; }
sleep 3  # the last scrape and evaluation after the end
checks no-alerts "$prom" "$am" "$WORK/runs/control"
pass "control run: $(jq -s length "$WORK/runs/control/steps.rank0.jsonl") steps scraped, no alert"

echo "B. rank 1 hangs at step 30; rank 0 waits in a collective (collective timeout 30 s)"
port=$(checks free-port-run 2)
job hang "$port" 100000 30 --inject hang:rank=1,step=30,phase=data
checks alert-fires "$prom" "$am" ShardtrainCollectiveInFlight \
  "{\"run_dir\": \"$WORK/runs/hang\", \"rank\": \"0\", \"host\": \"$host\", \"comm_group\": \"dp\"}" 60
kill -0 "$job_pid" 2>/dev/null || fail "the job had ended before the alert: not before the collective timeout"
[ ! -e "$WORK/runs/hang/flight.rank0.json" ] || fail "rank 0 had timed out (flight.rank0.json) before the alert"
pass "ShardtrainCollectiveInFlight fired before the collective timeout"
rc=0; wait "$job_pid" || rc=$?
[ "$rc" -ne 0 ] || fail "the hung job exited 0"

echo "C. rank 1 stopped with SIGSTOP (collective timeout 300 s: no timeout meanwhile)"
port=$(checks free-port-run 2)
job stopped "$port" 100000 300
checks prom-series "$prom" "$WORK/runs/stopped" 2 "$host" 30
rank1_pid=$(head -1 "$WORK/runs/stopped/steps.rank1.jsonl" | jq .pid)
kill -STOP "$rank1_pid"
pids+=("$rank1_pid")
checks alert-fires "$prom" "$am" ShardtrainTrainerStuck \
  "{\"run_dir\": \"$WORK/runs/stopped\", \"rank\": \"1\", \"host\": \"$host\"}" 90
pass "ShardtrainTrainerStuck fired for the stopped rank"
kill -CONT "$rank1_pid"
kill "$job_pid"
wait "$job_pid" 2>/dev/null || true

echo "D. a metrics port in use"
port=$(checks free-port-run 2)
python3 -c "import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1',$((port + 1)))); s.listen(); print('listening', flush=True); time.sleep(120)" \
  >"$WORK/holder.log" &
holder=$!
pids+=("$holder")
for _ in $(seq 20); do grep -q listening "$WORK/holder.log" && break; sleep 0.2; done
rc=0
mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 --layers 2 --heads 2 --d-model 32 \
  --peak-gflops 100 --global-batch 8 --micro-batch 2 --steps 3 --metrics-port "$port" --run-dir "$WORK/runs/in-use" \
  >"$WORK/in-use.log" 2>&1 || rc=$?
echo "  exit $rc: $(grep -m1 'metrics-port' "$WORK/in-use.log")"
[ "$rc" -eq 2 ] || { cat "$WORK/in-use.log" >&2; fail "a metrics port in use: exit $rc, expected 2"; }
grep -q "cannot serve metrics on 127.0.0.1:$((port + 1))" "$WORK/in-use.log" || fail "the message does not name 127.0.0.1:$((port + 1))"
[ ! -e "$WORK/runs/in-use/steps.rank0.jsonl" ] || fail "the job trained although its metrics port was taken"
pass "a port in use: exit 2 at start, naming 127.0.0.1:$((port + 1))"
rc=0
"$BIN_DIR/run-resilient" --metrics-port $((port + 1)) -- /bin/true --run-dir "$WORK/runs/launcher-in-use" \
  >"$WORK/launcher-in-use.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/launcher-in-use.log" >&2; fail "the launcher on a port in use: exit $rc, expected 2"; }
grep -q "127.0.0.1:$((port + 1))" "$WORK/launcher-in-use.log" || fail "the launcher's message does not name 127.0.0.1:$((port + 1))"
[ ! -e "$WORK/runs/launcher-in-use/attempt0.log" ] || fail "the launcher launched although its metrics port was taken"
pass "the launcher on a port in use: exit 2 before its first launch: $(head -1 "$WORK/launcher-in-use.log")"

echo "E. rank 1 sleeps 60 ms a step in its data phase: a straggler (live checks every 10 steps)"
port=$(checks free-port-run 2)
JOB_DELAY=delay:rank=1,ms=60 JOB_LOG_EVERY=10 job straggler "$port" 100000 30
checks alert-pending "$prom" ShardtrainStraggler \
  "{\"run_dir\": \"$WORK/runs/straggler\", \"rank\": \"1\", \"host\": \"$host\", \"section\": \"data\", \"score\": \"relative\"}" 60
kill "$job_pid"
wait "$job_pid" 2>/dev/null || true
pass "ShardtrainStraggler pending for rank 1 in data, and for nothing else of the run"

echo "F. the resilient launcher's own series: rank 1 killed in the first attempt, the restart runs"
port=$(checks free-port-run 3)  # the ranks' two, then the launcher's
# once.sh FLAG COMMAND...: the first time, COMMAND with a kill of rank 1 at step 8; later, COMMAND alone.
cat >"$WORK/once.sh" <<'SH'
#!/usr/bin/env bash
flag=$1; shift
if [ -e "$flag" ]; then exec "$@"; fi
touch "$flag"
exec "$@" --inject kill:rank=1,step=8
SH
chmod +x "$WORK/once.sh"
"$BIN_DIR/run-resilient" --max-restarts 2 --backoff 0 --metrics-port $((port + 2)) -- \
  "$WORK/once.sh" "$WORK/killed-once" mpirun -np 2 --oversubscribe "$BIN_DIR/ddp-train" --data "$DATA" --seq-len 32 \
  --layers 2 --heads 2 --d-model 32 --peak-gflops 100 --log-every 1000 --global-batch 8 --micro-batch 2 --steps 300 \
  --ckpt-every 4 --inject delay:rank=all,ms=40 --metrics-port "$port" --run-dir "$WORK/runs/launcher" \
  >"$WORK/launcher.log" 2>&1 &
job_pid=$!
pids+=("$job_pid")
ln -s "$WORK/runs/launcher/prometheus-launcher-targets.json" "$WORK/targets/launcher.json"
checks launcher-series "$prom" "$WORK/runs/launcher" "$host" $((port + 2)) 1 2 dead-rank 1 60
rc=0; wait "$job_pid" || rc=$?
[ "$rc" -eq 0 ] || { tail -20 "$WORK/launcher.log" >&2; fail "the launcher exited $rc after the restart"; }
pass "the launcher's restarts, world size and last verdict (dead-rank, rank 1, $host) in Prometheus"
