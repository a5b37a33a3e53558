#!/usr/bin/env bash
# The cluster in a box: an N-node Slurm cluster on this machine, for trying and testing what the
# project does across nodes (docs/RUNBOOK.md, "Trying multi-node on one machine").
#
#   scripts/cluster/box.sh start DIR [-n N]      start N nodes (default 3); waits until all are idle
#   scripts/cluster/box.sh status DIR            each node: namespace, slurmd, link, rate; then sinfo
#   scripts/cluster/box.sh exec DIR [NODE] -- CMD...   run CMD on the login node `head` (default) or
#                                                on NODE, with SLURM_CONF and Open MPI's settings
#   scripts/cluster/box.sh shape DIR NODE RATE   limit NODE's link to RATE both ways (tc tbf:
#                                                e.g. 100mbit, 500kbit, 1gbit); `slow` is the same
#   scripts/cluster/box.sh partition DIR NODE    take NODE's link down (its processes keep running)
#   scripts/cluster/box.sh lose DIR NODE         kill every process of NODE at once (slurmd, step
#                                                daemons, tasks and the namespaces themselves)
#   scripts/cluster/box.sh restore DIR NODE      bring NODE back: a lost node is rebuilt and its
#                                                slurmd started; a partitioned or shaped link is
#                                                set up again at full rate
#   scripts/cluster/box.sh rate DIR FROM TO [MB] a TCP copy of MB megabytes (default 8) from FROM to
#                                                TO; prints "MB/s SECONDS"
#   scripts/cluster/box.sh stop DIR              cancel the jobs, stop every daemon by pid, kill
#                                                what is left in the box's namespaces, check none is
#
# What a node is. Every node (node1..nodeN) and the login node `head` is a set of namespaces held
# open by one sleeper process (`unshare --net --uts --mount`): its own hostname, its own network
# with one address on a private /24 (BOX_NET, default 10.211.0: head .1, nodeK .(10+K)), its own
# /tmp and /dev/shm (tmpfs: `srun --mpi=pmix` fails when nodes share /tmp), its own /etc/hosts
# naming every node, and a node-local folder DIR/nodes/nodeK seen at DIR/node (slurmd's spool, log
# and pid file: one slurm.conf serves all nodes). The bridge joining the nodes lives in head's
# network namespace; each node's link is a veth pair (nodeK: eth0 <-> head: vK). DIR itself is
# the cluster's shared file system: it must be outside /tmp. Processes enter a node with
# `nsenter --net --uts --mount` into the sleeper's namespaces (`ip netns exec` remounts /sys, and
# slurmd then fails on cgroups). munged, slurmctld (on head) and one `slurmd -N nodeK` per node run
# in the foreground as background processes and are stopped by pid.
#
# The host is never changed: no interface, address, route, qdisc or sysctl is made or touched in
# the host's network namespace, and every command that changes a namespace first checks that it
# runs inside one of the box's own (bash box.sh _in). Clients (sinfo, srun, salloc, sbatch) reach
# the controller only from inside the box: run them with `exec`.
#
# Environment: BOX_NET (the /24's first three octets, default 10.211.0), BOX_CPUS (CPUs per node,
# default 2; more than the machine has is fine: jobs that mostly wait share cores), BOX_SLURMD_TIMEOUT
# (seconds before a silent node is marked DOWN, default 10), BOX_WAIT (seconds to wait for idle
# nodes, default 60). Runs as root (namespaces, mounts, tc); Debian's slurmctld slurmd
# slurm-client munge (scripts/setup.sh installs them), iproute2 and util-linux.
set -euo pipefail

me=box.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/slurm-conf.sh"
die() { echo "$me: $*" >&2; exit 2; }
say() { echo "$me: $*" >&2; }

# _in NAME CWD CMD...: the first thing run inside a node's namespaces (by nsenter). Refuses to go on
# unless the network, UTS and mount namespaces all differ from those box.sh was started in
# (BOX_HOST_NS, set below; PID 1's are not readable in every container): a mistake here would
# change the host's network or hostname.
if [ "${1:-}" = _in ]; then
  name=$2 cwd=$3; shift 3
  for n in net uts mnt; do
    outer=$(tr ' ' '\n' <<<"${BOX_HOST_NS:-}" | grep "^$n:" || true)
    [ -n "$outer" ] && [ "$(readlink "/proc/self/ns/$n")" != "$outer" ] ||
      die "internal: '$name' would run in the host's $n namespace: refused (nothing changed)"
  done
  unset BOX_HOST_NS
  cd "$cwd" 2>/dev/null || cd /
  exec "$@"
fi

usage="usage: box.sh start|stop|status|exec|shape|slow|partition|lose|restore|rate DIR ... (box.sh --help)"
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  awk 'NR > 1 && /^set -euo/ { exit } NR > 1 && /^#/ { sub(/^# ?/, ""); print }' "$0"; exit 0
fi
(($# >= 2)) || die "$usage"
action=$1 dir=$2; shift 2
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, mounts, tc): run it as root"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
case "$dir/" in /tmp/*) die "DIR $dir is under /tmp, which every node has its own of: use a folder outside /tmp (it is the cluster's shared file system)" ;; esac
# What runs inside a node must be on the shared file system: a checkout under /tmp is invisible
# there (each node has its own /tmp). The box keeps its own copy of this script, slurm-conf.sh and tcp_rate.py.
mkdir -p "$dir/.box"
for f in box.sh slurm-conf.sh tcp_rate.py; do cmp -s "$here/$f" "$dir/.box/$f" || cp "$here/$f" "$dir/.box/$f"; done
self="$dir/.box/box.sh" here_shared="$dir/.box"
conf="$dir/slurm.conf"
export SLURM_CONF=$conf  # every client run inside the box talks to this cluster
ns="$dir/ns"           # sleeper pids (NAME.pid) and their network namespace (NAME.net)
run="$dir/run"         # daemon pids
net="${BOX_NET:-10.211.0}"
host_net=$(readlink /proc/self/ns/net)
[ -n "$host_net" ] || die "cannot read /proc/self/ns/net: namespaces unavailable here"
# The namespaces this script runs in: the host's, which nothing inside the box may be.
BOX_HOST_NS="$host_net $(readlink /proc/self/ns/uts) $(readlink /proc/self/ns/mnt)"
export BOX_HOST_NS

[ -s "$dir/box.env" ] && . "$dir/box.env"   # N and BOX_NET of the running box
nodes() { local k; for ((k = 1; k <= ${N:-0}; k++)); do echo "node$k"; done; }
addr_of() { case "$1" in head) echo "$net.1" ;; node*) echo "$net.$((10 + ${1#node}))" ;; esac; }
is_node() { [[ "$1" =~ ^node([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 1 && BASH_REMATCH[1] <= ${N:-0})); }

# alive NAME: the sleeper of NAME is running and still holds the namespace recorded at its start.
alive() {
  local pid
  [ -s "$ns/$1.pid" ] || return 1
  pid=$(cat "$ns/$1.pid")
  [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$(cat "$ns/$1.net" 2>/dev/null)" ]
}
# within NAME CMD...: run CMD inside NAME's namespaces (checked by _in), in the current folder.
within() {
  local name=$1 pid; shift
  alive "$name" || die "$name is not running (box.sh status $dir)"
  pid=$(cat "$ns/$name.pid")
  nsenter --net="/proc/$pid/ns/net" --uts="/proc/$pid/ns/uts" --mount="/proc/$pid/ns/mnt" -- \
    bash "$self" _in "$name" "$PWD" "$@"
}
# members NAME: every process in NAME's network namespace (the sleeper included).
members() {
  local want p
  want=$(cat "$ns/$1.net" 2>/dev/null) || return 0
  [ -n "$want" ] && [ "$want" != "$host_net" ] || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$want" ] && echo "${p#/proc/}"
  done
  return 0
}
# kill_all NAME: KILL every process of NAME in one call, wait (5 s at most) until they are gone.
kill_all() {
  local -a pids
  mapfile -t pids < <(members "$1")
  ((${#pids[@]})) || return 0
  kill -KILL "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do [ -z "$(members "$1")" ] && break; sleep 0.1; done
  [ -z "$(members "$1")" ] || say "$1: processes $(members "$1" | tr '\n' ' ')survived KILL"
}
# stop_pid NAME FILE: TERM the process in FILE (if it is still in NAME's namespace), KILL after 10 s.
stop_pid() {
  local name=$1 f=$2 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f"); rm -f "$f"
  [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$(cat "$ns/$name.net" 2>/dev/null)" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  say "$(basename "$f" .pid) (pid $pid) ignored TERM: KILL"; kill -KILL "$pid" 2>/dev/null || true
}

# make_ns NAME: a sleeper in new network, UTS and mount namespaces; its hostname, loopback,
# /etc/hosts, /tmp and /dev/shm. Mount propagation is private, so none of it reaches the host.
make_ns() {
  local name=$1 pid got=""
  unshare --net --uts --mount --propagation private sleep infinity </dev/null >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 50); do
    got=$(readlink "/proc/$pid/ns/net" 2>/dev/null || true)
    [ -n "$got" ] && [ "$got" != "$host_net" ] && break
    sleep 0.05
  done
  [ -n "$got" ] && [ "$got" != "$host_net" ] || { kill "$pid" 2>/dev/null; die "unshare did not make namespaces for $name"; }
  echo "$pid" >"$ns/$name.pid"; echo "$got" >"$ns/$name.net"
  within "$name" hostname "$name"
  within "$name" ip link set lo up
  within "$name" mount --bind "$dir/etc/hosts" /etc/hosts
  within "$name" mount -t tmpfs -o size=512m,mode=1777 "tmpfs-$name" /tmp
  within "$name" mount -t tmpfs -o size=256m,mode=1777 "shm-$name" /dev/shm
}

# make_node NODE: its namespaces, its link to head's bridge, its local folder at DIR/node.
make_node() {
  local node=$1 k=${1#node} pid
  make_ns "$node"
  pid=$(cat "$ns/$node.pid")
  mkdir -p "$dir/nodes/$node/spool"
  within "$node" mount --bind "$dir/nodes/$node" "$dir/node"
  # The pair is made in head's namespace, its far end moved straight into the node's.
  within head ip link add "v$k" type veth peer name eth0 netns "$pid"
  within head ip link set "v$k" master br0 up
  within "$node" ip addr add "$(addr_of "$node")/24" dev eth0
  within "$node" ip link set eth0 up
}

start_slurmd() {
  local node=$1
  within "$node" slurmd -D -f "$conf" -N "$node" >>"$dir/nodes/$node/slurmd.out" 2>&1 &
  echo $! >"$run/slurmd.$node.pid"
}

# wait_idle NODE...: until sinfo shows every NODE idle (BOX_WAIT s at most).
wait_idle() {
  local deadline=$((SECONDS + ${BOX_WAIT:-60})) states="" idle
  while ((SECONDS < deadline)); do
    states=$(within head sinfo -h -N -o '%N=%T' -n "$(IFS=,; echo "$*")" 2>/dev/null | sort -u | tr '\n' ' ' || true)
    idle=$(echo "$states" | tr ' ' '\n' | grep -c '=idle$' || true)
    ((idle == $#)) && return 0
    sleep 0.5
  done
  say "not idle after ${BOX_WAIT:-60}s: ${states:-no answer from slurmctld} (logs: $dir/log, $dir/nodes/*/slurmd.log)"
  return 1
}

do_stop() {
  local name
  if alive head && [ -s "$run/slurmctld.pid" ]; then
    # The jobs first: stopping slurmd leaves their step daemons and tasks running.
    local jobs
    jobs=$(within head squeue -h -o %i 2>/dev/null | tr '\n' ' ' || true)
    if [ -n "${jobs// /}" ]; then
      # shellcheck disable=SC2086 # one word per job id
      within head scancel $jobs 2>/dev/null || true
      for _ in $(seq 1 40); do [ -z "$(within head squeue -h -t R,CG,S -o %i 2>/dev/null || true)" ] && break; sleep 0.5; done
    fi
  fi
  for name in $(nodes); do alive "$name" && stop_pid "$name" "$run/slurmd.$name.pid"; done
  if alive head; then stop_pid head "$run/slurmctld.pid"; stop_pid head "$run/munged.pid"; fi
  # Whatever is left (step daemons, tasks, a shell of `exec`) and the sleepers: killed.
  for name in $(nodes) head; do kill_all "$name"; done
  local left=""
  for name in $(nodes) head; do
    [ -n "$(members "$name")" ] && left+=" $name: $(members "$name" | tr '\n' ' ')"
    rm -f "$ns/$name.pid" "$ns/$name.net"
  done
  rm -f "$run"/*.pid "$dir/box.env"
  [ -z "$left" ] || die "processes left in the box's namespaces:$left"
  say "stopped: no process left in the box's namespaces ($dir)"
}

# burst_for RATE: the token bucket tbf needs at RATE (1/100 s of traffic, at least 16 KiB).
burst_for() {
  [[ "$1" =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] ||
    die "RATE '$1' is not a number with kbit, mbit or gbit (e.g. 100mbit)"
  local n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]} bytes_s
  case "$unit" in kbit) bytes_s=$((n * 125)) ;; mbit) bytes_s=$((n * 125000)) ;; gbit) bytes_s=$((n * 125000000)) ;; esac
  local b=$((bytes_s / 100)); ((b < 16384)) && b=16384
  echo "$b"
}

node_arg() { is_node "${1:-}" || die "no node '${1:-}' in this box (nodes: $(nodes | tr '\n' ' '))"; }

case "$action" in
  start)
    n=3
    while (($#)); do
      case "$1" in -n) n=${2:?-n needs a number}; shift 2 ;; *) die "start: unknown option '$1' ($usage)" ;; esac
    done
    [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) || die "-n must be 1..200 (got '$n')"
    for b in munged slurmctld slurmd sinfo unshare nsenter ip tc; do
      command -v "$b" >/dev/null || die "$b not found: install slurmctld slurmd slurm-client munge iproute2 util-linux (scripts/setup.sh installs Slurm's)"
    done
    alive head && die "a box is already running in $dir (stop it first: box.sh stop $dir)"
    # A Unix socket's path holds at most 107 bytes; munged's lives in DIR/munge.
    ((${#dir} <= 85)) || die "DIR $dir is ${#dir} characters long: munge's socket path in it would pass the 107-byte limit; use a folder path of at most 85 characters"
    [[ "$net" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "BOX_NET must be three octets like 10.211.0 (got '$net')"
    N=$n
    printf 'N=%s\nnet=%s\n' "$N" "$net" >"$dir/box.env"
    mkdir -p "$ns" "$run" "$dir/etc" "$dir/log" "$dir/state" "$dir/node" "$dir/munge"
    chmod 700 "$dir/munge"
    trap 'echo "$me: start failed: stopping what was started" >&2; do_stop >/dev/null 2>&1 || true' ERR
    { echo "127.0.0.1 localhost"; echo "$(addr_of head) head"
      for node in $(nodes); do echo "$(addr_of "$node") $node"; done; } >"$dir/etc/hosts"

    make_ns head
    within head ip link add br0 type bridge
    within head ip addr add "$(addr_of head)/24" dev br0
    within head ip link set br0 up
    for node in $(nodes); do make_node "$node"; done

    # munge: one key for the cluster; its socket is on the shared folder, so every node reaches it
    # (a path socket is not bound to a network namespace).
    key="$dir/munge/munge.key"
    [ -s "$key" ] || { dd if=/dev/urandom of="$key" bs=1 count=1024 status=none; chmod 400 "$key"; }
    socket="$dir/munge/munge.socket"
    within head munged -F --force --key-file="$key" --socket="$socket" --pid-file="$dir/munge/munged.pid.own" \
      --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" >>"$dir/log/munged.out" 2>&1 &
    echo $! >"$run/munged.pid"

    cpus=${BOX_CPUS:-2}
    timeout=${BOX_SLURMD_TIMEOUT:-10}
    {
      cat <<EOF
# Written by scripts/cluster/box.sh: the cluster in a box in $dir.
ClusterName=box
SlurmctldHost=head($(addr_of head))
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
# DIR/node is each node's own folder (DIR/nodes/NODE, bound there in the node's mount namespace).
SlurmdSpoolDir=$dir/node/spool
SlurmdPidFile=$dir/node/slurmd.pid
SlurmdLogFile=$dir/node/slurmd.log
SlurmctldPidFile=$run/slurmctld.pid.own
SlurmctldLogFile=$dir/log/slurmctld.log
TCPTimeout=2
EOF
      slurm_conf_shared "$socket" "$dir/state" "$dir/log/jobcomp.txt" 5 "$timeout" 5
      for node in $(nodes); do
        echo "NodeName=$node NodeAddr=$(addr_of "$node") NodeHostname=$node CPUs=$cpus RealMemory=2000 State=UNKNOWN"
      done
      echo "PartitionName=box Nodes=node[1-$N] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    } >"$conf"
    : >"$dir/cgroup.conf"
    for _ in $(seq 1 50); do [ -S "$socket" ] && break; sleep 0.1; done
    [ -S "$socket" ] || die "munged did not start (log: $dir/log/munged.log)"

    export SLURM_CONF=$conf
    within head slurmctld -D -i -f "$conf" >>"$dir/log/slurmctld.out" 2>&1 &
    echo $! >"$run/slurmctld.pid"
    for node in $(nodes); do start_slurmd "$node"; done
    # shellcheck disable=SC2046 # one word per node
    wait_idle $(nodes) || false
    trap - ERR
    say "$N nodes idle (node1..node$N at $net.11.., controller head $(addr_of head):6817), in $dir"
    say "try: box.sh exec $dir -- srun -N$N hostname"
    ;;

  stop) do_stop ;;

  status)
    alive head || { echo "no box running in $dir"; exit 1; }
    printf '%-7s %-9s %-11s %-6s %s\n' node namespace slurmd link rate
    for node in $(nodes); do
      k=${node#node}
      if ! alive "$node"; then printf '%-7s %-9s %-11s %-6s %s\n' "$node" lost - - -; continue; fi
      pid=$(cat "$run/slurmd.$node.pid" 2>/dev/null || true)
      sd="gone"; [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && sd="pid $pid"
      link=$(within head ip -o link show "v$k" | grep -q 'state UP' && echo up || echo down)
      rate=$(within head tc qdisc show dev "v$k" | awk '/tbf/ { for (i = 1; i <= NF; i++) if ($i == "rate") print $(i + 1) }')
      printf '%-7s %-9s %-11s %-6s %s\n' "$node" up "$sd" "$link" "${rate:-full}"
    done
    within head sinfo -N -o '%N %T %E'
    ;;

  exec)
    target=head
    if (($#)) && [ "$1" != -- ]; then node_arg "$1"; target=$1; shift; fi
    [ "${1:-}" = -- ] && shift
    (($#)) || die "exec: no command ($usage)"
    # What a job needs in the box: the cluster's config, Open MPI as root, and Open MPI's TCP
    # traffic (ranks and their daemons) on the box's network only.
    export SLURM_CONF=$conf OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_btl_tcp_if_include="$net.0/24" OMPI_MCA_oob_tcp_if_include="$net.0/24"
    within "$target" "$@"
    ;;

  shape|slow)
    node_arg "${1:-}"; node=$1; rate=${2:?"$action needs a RATE (e.g. 100mbit)"}
    burst=$(burst_for "$rate")
    k=${node#node}
    # Both ways: head's end of the pair shapes what flows to the node, the node's end what it sends.
    within head tc qdisc replace dev "v$k" root tbf rate "$rate" burst "$burst" latency 100ms
    within "$node" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
    say "$node: link shaped to $rate both ways (tbf, burst $burst bytes)"
    ;;

  partition)
    node_arg "${1:-}"; node=$1
    within head ip link set "v${node#node}" down
    say "$(date -u +%FT%T.%3NZ) $node: link down (partitioned; its processes keep running)"
    ;;

  lose)
    node_arg "${1:-}"; node=$1
    alive "$node" || die "$node is already lost (box.sh restore $dir $node)"
    n_procs=$(members "$node" | wc -l)
    kill_all "$node"
    rm -f "$ns/$node.pid" "$ns/$node.net" "$run/slurmd.$node.pid"
    say "$(date -u +%FT%T.%3NZ) $node: lost ($n_procs processes killed at once, its namespaces and link gone)"
    ;;

  restore)
    node_arg "${1:-}"; node=$1
    k=${node#node}
    if ! alive "$node"; then
      make_node "$node"
      start_slurmd "$node"
      wait_idle "$node"
      say "$node: rebuilt, slurmd started, idle"
    else
      within head tc qdisc del dev "v$k" root 2>/dev/null || true
      within "$node" tc qdisc del dev eth0 root 2>/dev/null || true
      within head ip link set "v$k" up
      say "$node: link up at full rate"
    fi
    ;;

  rate)
    node_arg "${1:-}"; node_arg "${2:-}"
    from=$1 to=$2 mb=${3:-8}
    # The receiver listens on the TO node and prints the rate it saw; the sender streams MB there.
    port=5599
    out=$(mktemp "$dir/log/rate.XXXXXX")
    within "$to" python3 "$here_shared/tcp_rate.py" receive "$(addr_of "$to")" "$port" >"$out" 2>&1 &
    receiver=$!
    for _ in $(seq 1 50); do grep -q listening "$out" && break; sleep 0.1; done
    within "$from" python3 "$here_shared/tcp_rate.py" send "$(addr_of "$to")" "$port" "$mb" ||
      { kill "$receiver" 2>/dev/null; die "rate: the copy from $from to $to failed"; }
    wait "$receiver" || die "rate: the receiver on $to failed: $(cat "$out")"
    grep -v listening "$out"; rm -f "$out"
    ;;

  *) die "unknown command '$action' ($usage)" ;;
esac
