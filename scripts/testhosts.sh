#!/usr/bin/env bash
# scripts/testhosts.sh: a cluster of test hosts on this machine. Each host is a
# network namespace with its own hostname (UTS namespace), its own
# CLOCK_MONOTONIC (kernel time namespace, a whole number of seconds ahead), its
# own /etc/hosts and its own CPU cgroup, joined to the others by a bridge, with
# addresses in the benchmarking range 198.18.0.0/15 only. Open MPI runs across
# the hosts as across nodes: `testhosts.sh mpirun ...` adds the hostfile and a
# launch agent that starts each host's daemon inside it. Faults are switched
# on and off while a job runs. docs/testing.md, "Test hosts", says what it
# models and what it does not.
#
#   testhosts.sh up N [--slots S] [--offset-step SECONDS] [--local-dir DIR] [--loopback-names]
#   testhosts.sh down | status | hostfile | mpirun-args
#   testhosts.sh mpirun MPIRUN_ARGS...        mpirun over the hosts
#   testhosts.sh exec HOST COMMAND...         COMMAND as a process of HOST
#   testhosts.sh agent HOST COMMAND...        Open MPI's launch agent (ssh's place)
#   testhosts.sh slow HOST RATE [BURST]       HOST's link limited to RATE (tc tbf, e.g. 200mbit), both ways;
#                                             BURST (default 64kb) must grow with RATE above 1gbit: a
#                                             64 KiB bucket runs dry between timer ticks at GB/s
#   testhosts.sh slow-out HOST RATE [BURST]   only what HOST sends limited to RATE (a transmitter that fails)
#   testhosts.sh delay HOST DELAY [LOSS]      HOST's link delayed (e.g. 2ms) and lossy (e.g. 1%), both ways
#   testhosts.sh throttle HOST PERCENT [PERIOD_MS]
#                                             HOST's processes get PERCENT of one core together, granted
#                                             per PERIOD_MS (default 100); a short period slows short work too
#   testhosts.sh cut HOST                     HOST's link down
#   testhosts.sh kill HOST [SIGNAL]           every process of HOST killed (SIGKILL by default)
#   testhosts.sh heal HOST                    every fault of HOST removed
#
# HOST is a number (1..N), a host name (host1) or an address (198.18.C.1).
# RANKSCOPE_TESTHOSTS_CLUSTER=C (0-255, default 0) keeps clusters apart: its
# hosts are 198.18.C.1..N/24 and the launching side is 198.18.C.254. Bring-up
# is idempotent (an old cluster of the same number is torn down first) and
# everything made is removed by `down`.
set -euo pipefail

script=$(readlink -f "$0")
cluster=${RANKSCOPE_TESTHOSTS_CLUSTER:-0}
prefix=rankscope$cluster
state=/run/rankscope-testhosts/$cluster
bridge=rs${cluster}br
subnet=198.18.$cluster
launcher_address=$subnet.254

die() {
  echo "testhosts.sh: $*" >&2
  exit 1
}

[[ $cluster =~ ^[0-9]+$ ]] && ((cluster <= 255)) || die "RANKSCOPE_TESTHOSTS_CLUSTER=$cluster is not a number 0-255"

host_count() {
  [ -f "$state/hosts" ] || die "no test hosts are up (cluster $cluster); start them with: $0 up N"
  wc -l <"$state/hosts"
}

# The host number K of HOST (K, hostK or 198.18.C.K).
host_number() {
  local host=$1 count
  count=$(host_count)
  case $host in
    host*) host=${host#host} ;;
    "$subnet".*) host=${host#"$subnet".} ;;
  esac
  [[ $host =~ ^[0-9]+$ ]] && ((host >= 1 && host <= count)) || die "no test host '$1' (hosts 1-$count are up)"
  echo "$host"
}

namespace_of() { echo "$prefix-h$1"; }
veth_of() { echo "rs${cluster}h$1"; }

cgroup_root() {
  if [ -d /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cgroup.procs ]; then
    echo /sys/fs/cgroup/cpu/$prefix
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
    echo /sys/fs/cgroup/$prefix
  fi
}

# Sets a CPU quota (PERCENT of one core, or "max") on a host's cgroup, v1 or
# v2, granted per PERIOD_MS (default 100, the kernel's own).
set_quota() {
  local group=$1 percent=$2 period=$((${3:-100} * 1000))
  if [ -f "$group/cpu.cfs_quota_us" ]; then
    # The quota first when the period shrinks: the kernel refuses a quota above what the period allows.
    if [ "$percent" = max ]; then echo -1 >"$group/cpu.cfs_quota_us"; else echo $((percent * period / 100)) >"$group/cpu.cfs_quota_us"; fi
    echo "$period" >"$group/cpu.cfs_period_us"
  else
    if [ "$percent" = max ]; then echo "max $period" >"$group/cpu.max"; else echo "$((percent * period / 100)) $period" >"$group/cpu.max"; fi
  fi
}

require_root_and_kernel() {
  [ "$(id -u)" -eq 0 ] || die "must run as root: it makes network namespaces, a bridge, time namespaces and cgroups"
  local tool package
  for tool in ip:iproute2 tc:iproute2 unshare:util-linux nsenter:util-linux; do
    package=${tool#*:}
    tool=${tool%%:*}
    command -v "$tool" >/dev/null || die "'$tool' is missing (Debian package $package)"
  done
  [ -e /proc/self/ns/time ] || die "this kernel has no time namespaces (Linux 5.6 or later, CONFIG_TIME_NS): the hosts' clocks cannot be offset"
  unshare --time --fork --monotonic 1 true 2>/dev/null ||
    die "this kernel or util-linux cannot offset CLOCK_MONOTONIC in a time namespace (unshare --time --monotonic failed)"
  [ -n "$(cgroup_root)" ] || die "no cgroup CPU controller (v1 /sys/fs/cgroup/cpu or v2 with cpu enabled): CPU throttling is impossible"
}

cmd_down() {
  [ "$(id -u)" -eq 0 ] || die "must run as root"
  local ns group
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-h[0-9]*$" || true); do
    # Processes first: a namespace with processes in it outlives its name.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns delete "$ns"
    rm -rf "/etc/netns/$ns"
  done
  ip link delete "$bridge" 2>/dev/null || true
  # A host's end of its link outlives a namespace still held by a process that left it.
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^$(veth_of '')[0-9]*$" || true); do
    ip link delete "$link" 2>/dev/null || true
  done
  for shm in "$state"/shm/h*; do
    if mountpoint -q "$shm"; then umount -l "$shm"; fi
  done
  group=$(cgroup_root)
  if [ -n "$group" ] && [ -d "$group" ]; then
    for sub in "$group"/h*; do
      [ -d "$sub" ] || continue
      # Stragglers that left the namespace's view still hold the group.
      xargs -r kill -KILL <"$sub/cgroup.procs" 2>/dev/null || true
      for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$sub" 2>/dev/null && break; sleep 0.1; done
    done
    rmdir "$group" 2>/dev/null || true
  fi
  rm -rf "$state"
}

cmd_up() {
  local count=${1:-}
  shift || true
  [[ $count =~ ^[0-9]+$ ]] && ((count >= 1 && count <= 64)) || die "up: the number of hosts must be 1-64 (got '$count')"
  local slots=2 offset_step=3 local_dir= loopback_names=
  while [ $# -gt 0 ]; do
    case $1 in
      --loopback-names) loopback_names=1; shift ;;
      --slots) slots=$2; shift 2 ;;
      --offset-step) offset_step=$2; shift 2 ;;
      --local-dir) local_dir=$2; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ $slots =~ ^[0-9]+$ ]] && ((slots >= 1)) || die "up: --slots must be a positive number"
  [[ $offset_step =~ ^[0-9]+$ ]] || die "up: --offset-step must be a whole number of seconds (time namespaces offset by seconds)"
  require_root_and_kernel
  cmd_down
  mkdir -p "$state"
  ip link add "$bridge" type bridge
  ip addr add "$launcher_address/24" dev "$bridge"
  ip link set "$bridge" up
  local group k ns veth hosts_file
  group=$(cgroup_root)
  mkdir -p "$group"
  hosts_file=$state/etc-hosts
  {
    echo "127.0.0.1 localhost"
    echo "$launcher_address launcher"
    for ((k = 1; k <= count; k++)); do echo "$subnet.$k host$k"; done
  } >"$hosts_file"
  : >"$state/hosts"
  : >"$state/hostfile"
  for ((k = 1; k <= count; k++)); do
    ns=$(namespace_of $k)
    veth=$(veth_of $k)
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip -n "$ns" addr add "$subnet.$k/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # `ip netns exec` puts /etc/netns/NS/* over /etc/*: each host resolves
    # every host's name, as on a cluster with DNS.
    mkdir -p "/etc/netns/$ns"
    # --loopback-names: each host's own name on 127.0.1.1, as Debian's
    # installer writes it (the others still find it by its address, as DNS
    # would tell them).
    if [ -n "$loopback_names" ]; then
      { echo "127.0.1.1 host$k"; grep -v " host$k\$" "$hosts_file"; } >"/etc/netns/$ns/hosts"
    else
      cp "$hosts_file" "/etc/netns/$ns/hosts"
    fi
    echo "host$k" >"/etc/netns/$ns/hostname"
    mkdir -p "$group/h$k"
    set_quota "$group/h$k" max
    echo "$k host$k $subnet.$k $((offset_step * (k - 1)))" >>"$state/hosts"
    echo "$subnet.$k slots=$slots" >>"$state/hostfile"
    if [ -n "$local_dir" ]; then mkdir -p "$state/local/h$k"; fi
    # A node's own /dev/shm: what its processes share (TSC calibration,
    # Open MPI's shared memory) stays on it.
    mkdir -p "$state/shm/h$k"
    mount -t tmpfs -o mode=1777,size=1g "rankscope-testhost$k" "$state/shm/h$k"
  done
  echo "$local_dir" >"$state/local-dir"
  printf '#!/bin/sh\nRANKSCOPE_TESTHOSTS_CLUSTER=%s exec %q agent "$@"\n' "$cluster" "$script" >"$state/agent"
  chmod +x "$state/agent"
  # The first ping over a new bridge can take a while (neighbour discovery).
  for ((k = 1; k <= count; k++)); do
    ping -c 1 -W 5 "$subnet.$k" >/dev/null 2>&1 || ip netns exec "$(namespace_of $k)" true
  done
  echo "$count test hosts up (cluster $cluster): $(cut -d' ' -f2,3 "$state/hosts" | paste -sd, - | sed 's/,/, /g')"
  echo "clock offsets (s): $(cut -d' ' -f4 "$state/hosts" | paste -sd' ' -)"
  echo "hostfile: $state/hostfile"
}

# Runs COMMAND... as a process of host K: in its network namespace, its cgroup,
# its own UTS namespace named hostK and its time namespace. Environment is the
# caller's (Open MPI's daemons get theirs from the command line, as over ssh).
enter_host() {
  local k=$1
  shift
  local ns offset group local_dir
  ns=$(namespace_of "$k")
  offset=$(awk -v k="$k" '$1 == k {print $4}' "$state/hosts")
  group=$(cgroup_root)/h$k
  if [ -f "$group/tasks" ]; then echo $$ >"$group/tasks"; else echo $$ >"$group/cgroup.procs"; fi
  local_dir=$(cat "$state/local-dir")
  local mounts
  mounts="mount --bind $(printf %q "$state/shm/h$k") /dev/shm &&"
  if [ -n "$local_dir" ]; then
    mkdir -p "$local_dir"
    mounts+=" mount --bind $(printf %q "$state/local/h$k") $(printf %q "$local_dir") &&"
  fi
  # `ip netns exec` gives the host a mount namespace of its own (its /etc and
  # /sys), where its /dev/shm and local folder are mounted too.
  exec ip netns exec "$ns" unshare --uts --time --fork --monotonic "$offset" --boottime "$offset" \
    /bin/sh -c "hostname host$k && $mounts exec \"\$@\"" testhost "$@"
}

cmd_agent() {
  local k
  k=$(host_number "$1")
  shift
  # Like ssh, the command arrives as words for a shell on the other side.
  enter_host "$k" /bin/sh -c "$*"
}

cmd_exec() {
  local k
  k=$(host_number "$1")
  shift
  [ $# -gt 0 ] || die "exec: no command"
  enter_host "$k" "$@"
}

mpirun_args() {
  # Open MPI's control and data traffic stays on the test network; ranks of
  # one host still share memory (vader), as on a node. The hosts share this
  # machine's cores, but each host's daemon binds as if they were its own:
  # with 2 ranks or fewer Open MPI binds each to core 0 of its host, the same
  # core for every host, where two polling ranks take turns by the
  # scheduler's slice (an MPI round trip of 8 ms, not 13 us). Unbound by
  # default; a --bind-to of the caller's still wins.
  echo --hostfile "$state/hostfile" -mca plm_rsh_agent "$state/agent" -mca plm_rsh_no_tree_spawn 1 \
    -mca oob_tcp_if_include "$subnet.0/24" -mca btl tcp,vader,self -mca btl_tcp_if_include "$subnet.0/24" \
    -mca hwloc_base_binding_policy none
}

cmd_mpirun() {
  host_count >/dev/null
  # shellcheck disable=SC2046
  exec mpirun $(mpirun_args) "$@"
}

tc_both_ends() {
  local k=$1
  shift
  tc qdisc replace dev "$(veth_of "$k")" root "$@"
  ip netns exec "$(namespace_of "$k")" tc qdisc replace dev eth0 root "$@"
}

cmd_fault() {
  local fault=$1 k
  k=$(host_number "${2:-}")
  local group
  group=$(cgroup_root)/h$k
  case $fault in
    slow)
      [ -n "${3:-}" ] || die "slow: give a rate, e.g. 200mbit"
      tc_both_ends "$k" tbf rate "$3" burst "${4:-64kb}" latency 100ms ;;
    slow-out)
      [ -n "${3:-}" ] || die "slow-out: give a rate, e.g. 200mbit"
      ip netns exec "$(namespace_of "$k")" tc qdisc replace dev eth0 root tbf rate "$3" burst "${4:-64kb}" latency 100ms ;;
    delay)
      [ -n "${3:-}" ] || die "delay: give a delay, e.g. 2ms"
      tc_both_ends "$k" netem delay "$3" ${4:+loss "$4"} ;;
    throttle)
      [[ ${3:-} =~ ^[0-9]+$ ]] && (($3 >= 1)) || die "throttle: give a percentage of one core (1 or more)"
      [[ ${4:-100} =~ ^[0-9]+$ ]] && ((${4:-100} >= 1 && ${4:-100} <= 1000)) || die "throttle: the period is 1-1000 ms"
      set_quota "$group" "$3" "${4:-100}" ;;
    cut) ip link set "$(veth_of "$k")" down ;;
    kill)
      local pids
      pids=$( (ip netns pids "$(namespace_of "$k")"; cat "$group/cgroup.procs") 2>/dev/null | sort -u)
      [ -z "$pids" ] || kill -"${3:-KILL}" $pids 2>/dev/null || true ;;
    heal)
      tc qdisc delete dev "$(veth_of "$k")" root 2>/dev/null || true
      ip netns exec "$(namespace_of "$k")" tc qdisc delete dev eth0 root 2>/dev/null || true
      set_quota "$group" max
      ip link set "$(veth_of "$k")" up ;;
  esac
}

command=${1:-}
shift || true
case $command in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  status)
    host_count >/dev/null
    while read -r k name address offset; do
      echo "$name $address clock +${offset}s pids: $(ip netns pids "$(namespace_of "$k")" | wc -l)"
    done <"$state/hosts" ;;
  hostfile) host_count >/dev/null && echo "$state/hostfile" ;;
  mpirun-args) host_count >/dev/null && mpirun_args ;;
  mpirun) cmd_mpirun "$@" ;;
  agent) cmd_agent "$@" ;;
  exec) cmd_exec "$@" ;;
  slow | slow-out | delay | throttle | cut | kill | heal) cmd_fault "$command" "$@" ;;
  *) sed -n '2,/^set -euo/p' "$script" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
