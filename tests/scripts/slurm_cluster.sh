#!/usr/bin/env bash
# A one-node Slurm cluster in a folder, for tests: munged, slurmctld and slurmd from Debian's
# packages (slurmctld slurmd slurm-client munge; scripts/setup.sh installs them), with the config,
# state, spool, logs, pid files, sockets and the munge key all under DIR, loopback addresses only,
# no systemd and no cgroups. The daemons run in the foreground (-D / -F) as background processes
# of this script's caller's session and are stopped by pid.
#
#   tests/scripts/slurm_cluster.sh start DIR     start it; waits (bounded) until the node is idle,
#                                                then prints `export SLURM_CONF=DIR/slurm.conf`
#   tests/scripts/slurm_cluster.sh stop DIR      stop the daemons started by `start DIR` (by pid)
#   tests/scripts/slurm_cluster.sh env DIR       print the export line again
#
# Use from a test:  eval "$(slurm_cluster.sh start "$dir")"; trap 'slurm_cluster.sh stop "$dir"' EXIT
# The cluster: one node named after `hostname -s` at 127.0.0.1 with CPUs = `nproc` (and
# RealMemory from /proc/meminfo), partition `debug` (default, no time limit), select/cons_tres,
# proctrack/linuxproc, task/none, MpiDefault=none (Slurm's own default: `srun --mpi=pmix` must be
# asked for, as on most clusters), no accounting database: finished jobs stay in `scontrol show job`
# for MinJobAge=3600 s and every finished job is also written to DIR/jobcomp.txt (jobcomp/filetxt).
# Ports: two free loopback ports are picked at start (SLURM_CLUSTER_PORTS="CTLD SLURMD" to fix them).
# Environment: SLURM_CLUSTER_WAIT (seconds to wait for the idle node, default 60);
#   SLURM_CLUSTER_CPUS (the node's CPUs, default `nproc`; more than the machine has lets jobs that
#   mostly wait share cores: slurmd is then told to trust the config, SlurmdParameters=config_overrides).
# Runs as root (the daemons and the jobs run as the calling user: SlurmUser=SlurmdUser=$(id -un)).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/cluster/slurm-conf.sh"

die() { echo "slurm_cluster.sh: $*" >&2; exit 2; }
(($# == 2)) || die "usage: slurm_cluster.sh start|stop|env DIR"
action=$1
dir=$2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"

stop_pid() {  # stop_pid NAME: TERM, then KILL after 10 s, the process in DIR/NAME.pid
  local f="$dir/$1.pid" pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { echo "slurm_cluster.sh: $1 (pid $pid) ignored TERM: KILL" >&2; kill -KILL "$pid" 2>/dev/null || true; }
  fi
  rm -f "$f"
}

case "$action" in
  env) echo "export SLURM_CONF=$conf"; exit 0 ;;
  stop)
    # The jobs first (stopping slurmd leaves their slurmstepd and tasks running): cancel them and
    # wait (at most 30 s) until the controller has none left running.
    if [ -s "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
      export SLURM_CONF=$conf
      jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
      if [ -n "${jobs// /}" ]; then
        # shellcheck disable=SC2086 # one word per job id
        scancel $jobs 2>/dev/null || true
        for _ in $(seq 1 60); do [ -z "$(squeue -h -t R,CG,S -o %i 2>/dev/null)" ] && break; sleep 0.5; done
      fi
    fi
    # slurmd, then the controller, then munged.
    stop_pid slurmd; stop_pid slurmctld; stop_pid munged
    # Any step daemon of this cluster still alive (it carries this cluster's SLURM_CONF): KILL it.
    for p in /proc/[0-9]*; do
      [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] || continue
      tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$conf" || continue
      echo "slurm_cluster.sh: step daemon ${p#/proc/} outlived the cluster: KILL" >&2
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    done
    exit 0 ;;
  start) ;;
  *) die "unknown action '$action' (start, stop, env)" ;;
esac

for b in munged slurmctld slurmd sinfo; do
  command -v "$b" >/dev/null || die "$b not found: install the Debian packages slurmctld slurmd slurm-client munge (scripts/setup.sh does)"
done
[ -s "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null &&
  die "a cluster is already running in $dir (stop it first: slurm_cluster.sh stop $dir)"

user=$(id -un)
host=$(hostname -s)
cpus=${SLURM_CLUSTER_CPUS:-$(nproc)}
mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
if [ -n "${SLURM_CLUSTER_PORTS:-}" ]; then
  read -r ctld_port slurmd_port <<<"$SLURM_CLUSTER_PORTS"
else
  # Two free loopback ports (bound and released; the daemons bind them a moment later).
  read -r ctld_port slurmd_port < <(python3 "$(dirname "${BASH_SOURCE[0]}")/checks.py" free-ports 2)
fi
mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
chmod 700 "$dir/munge"

# munge: its own key, socket, pid, log and seed in DIR/munge (munged checks that they are private).
key="$dir/munge/munge.key"
[ -s "$key" ] || { dd if=/dev/urandom of="$key" bs=1 count=1024 status=none; chmod 400 "$key"; }
socket="$dir/munge/munge.socket"
force=()
[ "$(id -u)" -eq 0 ] && force=(--force)  # munged refuses root without it
munged -F "${force[@]}" --key-file="$key" --socket="$socket" --pid-file="$dir/munge/munged.pid.own" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" >>"$dir/log/munged.out" 2>&1 &
echo $! >"$dir/munged.pid"

cat >"$conf" <<EOF
# Written by tests/scripts/slurm_cluster.sh: a one-node test cluster in $dir.
ClusterName=shardtrain-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid.own
SlurmdPidFile=$dir/slurmd.pid.own
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
$(slurm_conf_shared "$socket" "$dir/state" "$dir/jobcomp.txt" 10 60 10)
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
: >"$dir/cgroup.conf"

# munged must answer before the Slurm daemons ask it for credentials.
for _ in $(seq 1 50); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || { cat "$dir/log/munged.out" "$dir/log/munged.log" >&2 2>/dev/null; die "munged did not start (log: $dir/log/munged.log)"; }

export SLURM_CONF=$conf
slurmctld -D -i -f "$conf" >>"$dir/log/slurmctld.out" 2>&1 &
echo $! >"$dir/slurmctld.pid"
slurmd -D -f "$conf" -N "$host" >>"$dir/log/slurmd.out" 2>&1 &
echo $! >"$dir/slurmd.pid"

wait_s=${SLURM_CLUSTER_WAIT:-60}
deadline=$((SECONDS + wait_s))
state=""
while ((SECONDS < deadline)); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  for d in slurmctld slurmd munged; do
    kill -0 "$(cat "$dir/$d.pid")" 2>/dev/null ||
      { tail -20 "$dir/log/$d.out" "$dir/log/$d.log" >&2 2>/dev/null || true; "$0" stop "$dir"; die "$d exited during start (logs in $dir/log)"; }
  done
  sleep 0.5
done
if [ "$state" != idle ]; then
  tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 2>/dev/null || true
  "$0" stop "$dir"
  die "node $host not idle after ${wait_s}s (state '${state:-no answer}'; logs in $dir/log)"
fi
echo "slurm_cluster.sh: node $host idle ($cpus CPUs), controller 127.0.0.1:$ctld_port, in $dir" >&2
echo "export SLURM_CONF=$conf"
