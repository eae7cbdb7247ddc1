#!/usr/bin/env bash
# bench/clock_hosts.sh RUNS HOSTS_LIST LABEL=BUILD_DIR...: clock sync across
# test hosts (scripts/testhosts.sh, as root), builds interleaved run by run.
# Each run: ddp_sim, 2 ranks per host, under `rankscope run` (in-process:
# rounds at MPI_Init and MPI_Finalize). Per build and host count: the stated
# bound and the true error (the measured offset against the hosts' kernel
# offsets, 3 s apart) of every rank off host1, at its first measurement, and
# the drift reported (the truth is 0: the hosts share one clock). Prints one
# table row per pair. RANKSCOPE_CLOCK (auto, raw) is passed to every rank.
set -euo pipefail
runs=$1 host_counts=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RANKSCOPE_TESTHOSTS_CLUSTER=210
work=$(mktemp -d)
trap '"$here/../scripts/testhosts.sh" down; rm -rf "$work"' EXIT
for hosts in $host_counts; do
  "$here/../scripts/testhosts.sh" up "$hosts" --slots 2 >/dev/null
  for run in $(seq "$runs"); do
    for build in "$@"; do
      label=${build%%=*} dir=${build#*=}
      rm -rf "$work/job.h5" "$work/job.h5.shards"
      "$here/../scripts/testhosts.sh" mpirun -x RANKSCOPE_CLOCK="${RANKSCOPE_CLOCK:-auto}" -n $((2 * hosts)) "$dir/coordinator/rankscope" run -o "$work/job.h5" -- \
        "$dir/examples/ddp_sim" --steps 5 --layers 4 --layer-mb 1 --forward-us 500 >/dev/null 2>&1
      "$dir/coordinator/rankscope" info --json "$work/job.h5" |
        /usr/bin/python3 -c '
import json, sys
label, hosts = sys.argv[1], sys.argv[2]
info = json.load(sys.stdin)
host = {r["rank"]: int(r["host"][4:]) for r in info["ranks"]}
for r in info["clock"]["ranks"]:
    if host[r["rank"]] == 1: continue
    error = r["offset_ns"] - 3_000_000_000 * (host[r["rank"]] - 1)
    print(label, hosts, r["bound_ns"], error, r["drift_ppm"])' "$label" "$hosts" >>"$work/samples"
    done
  done
done
/usr/bin/python3 - "$work/samples" <<'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    label, hosts, bound, error, drift = line.split()
    rows.setdefault((label, int(hosts)), []).append((int(bound), int(error), float(drift)))
print("| build | hosts | ranks measured | bound median | bound max | bounds > 1 ms | abs error max | errors beyond their bound | abs drift max (truth 0) |")
print("|---|---|---|---|---|---|---|---|---|")
for (label, hosts), samples in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    bounds = [b for b, _, _ in samples]
    print(f"| {label} | {hosts} | {len(samples)} | {statistics.median(bounds)/1e3:.1f} µs | {max(bounds)/1e3:.1f} µs | "
          f"{sum(b > 1_000_000 for b in bounds)} | {max(abs(e) for _, e, _ in samples)/1e3:.1f} µs | "
          f"{sum(abs(e) > b for b, e, _ in samples)} | "
          f"{max(abs(d) for _, _, d in samples):.1f} ppm |")
PY
