#!/usr/bin/env bash
# The main job: installs what is missing, builds, profiles the bundled example
# (ddp_sim, a DDP-like training job, one rank slowed down) under mpirun with
# `rankscope run`, and prints where the results are.
#
# scripts/demo.sh --hosts N (N >= 3, as root): the same across N test hosts
# made on this machine (scripts/testhosts.sh: each with its own hostname and
# a kernel clock 3 s ahead of the previous one), 2 ranks each, with the last
# host's link slowed to 400 Mbit/s; the report names that host. (With two
# hosts, a slow link between them slows both alike.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hosts=0
if [ "${1:-}" = --hosts ]; then
  hosts=${2:-}
  [[ $hosts =~ ^[0-9]+$ ]] && ((hosts >= 3)) || { echo "demo.sh: --hosts needs a number of hosts, 3 or more" >&2; exit 2; }
elif [ $# -gt 0 ]; then
  echo "usage: scripts/demo.sh [--hosts N]" >&2
  exit 2
fi
out=${RANKSCOPE_DEMO_OUT:-$root/demo-output}
"$root/scripts/setup-deps.sh"
# The command and the example only (the rest, tests mostly, is the test command's).
"$root/scripts/build.sh" --target rankscope --target ddp_sim "$root/build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rankscope=$root/build/coordinator/rankscope
ddp_sim=$root/build/examples/ddp_sim
rm -rf "$out" && mkdir -p "$out"

if [ "$hosts" -eq 0 ]; then
  ranks=${RANKSCOPE_DEMO_RANKS:-4}
  # Every rank on one machine shares one clock; two ranks get skewed virtual
  # clocks (seconds off, drifting) so the timeline shows the correction at work.
  export RANKSCOPE_FAKE_CLOCK=1:+2500000000:+80,3:-730000:-150
  echo "== profiling ddp_sim on $ranks ranks (rank 2 computes 1.3x slower): mpirun -n $ranks rankscope run -- ddp_sim"
  OMPI_MCA_rmaps_base_oversubscribe=1 mpirun -x RANKSCOPE_FAKE_CLOCK -n "$ranks" "$rankscope" run -o "$out/job.h5" -- \
    "$ddp_sim" --steps 20 --layers 12 --layer-mb 1 --forward-us 1500 --slow-rank 2 --slowdown 1.3 \
    --truth "$out/truth.json"
else
  testhosts=$root/scripts/testhosts.sh
  export RANKSCOPE_TESTHOSTS_CLUSTER=${RANKSCOPE_TESTHOSTS_CLUSTER:-100}
  trap '"$testhosts" down' EXIT
  "$testhosts" up "$hosts" --slots 2
  "$testhosts" slow "host$hosts" 400mbit
  ranks=$((2 * hosts))
  echo "== profiling ddp_sim on $hosts test hosts, $ranks ranks (host$hosts's link slowed to 400 Mbit/s):" \
    "testhosts.sh mpirun -n $ranks rankscope run -- ddp_sim"
  # Compute sleeps: the hosts share this machine's cores, and the link is what differs.
  "$testhosts" mpirun -n "$ranks" "$rankscope" run -o "$out/job.h5" -- \
    "$ddp_sim" --steps 12 --layers 8 --layer-mb 1 --forward-us 2000 --compute sleep --truth "$out/truth.json"
fi

echo "== rankscope info"
"$rankscope" info "$out/job.h5" | tee "$out/info.txt"
"$rankscope" info --json "$out/job.h5" >"$out/info.json"

echo "== rankscope report"
"$rankscope" report "$out/job.h5" | tee "$out/report.txt"
"$rankscope" report "$out/job.h5" --format json -o "$out/report.json"
"$rankscope" report "$out/job.h5" --format html -o "$out/report.html"

echo "== rankscope export"
"$rankscope" export "$out/job.h5" --perfetto "$out/job.pftrace" --chrome "$out/job.json"

cat <<DONE

results in $out:
  timeline          $out/job.h5          (HDF5; docs/format.md)
  summary           $out/info.txt, $out/info.json
  ground truth      $out/truth.json      (what ddp_sim did: buckets, slow rank, step times)
  Perfetto trace    $out/job.pftrace (open in ui.perfetto.dev), $out/job.json (Chrome JSON)
  analysis report   $out/report.txt, $out/report.json, $out/report.html (open in a browser)
DONE
