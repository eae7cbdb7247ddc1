#!/usr/bin/env bash
# bench/clock_hosts.sh RUNS [BUILD_DIR | LABEL=BUILD_DIR...]: clock sync
# across test hosts (scripts/testhosts.sh, as root) in every placement users
# use: 2, 3 and 4 hosts with 1, 2 and 4 ranks per host, in-process (rounds at
# MPI_Init and MPI_Finalize, ddp_sim) and sidecar (rounds every 0.5 s,
# sleep 3), on the kernel's clock (raw) and the TSC (auto), RUNS runs of
# each. Several builds, each LABEL=DIR, are interleaved run by run. Where a
# job has 2 ranks or fewer, two bindings are interleaved run by run:
# "bound", Open MPI's default there (each host binds as if the machine's
# cores were its own: core 0 of every host is one core), and "unbound", what
# testhosts.sh now asks for. Per rank off host1: its worst measurement's
# bound and true error (tests/hosts/clock_truth.py: the hosts' offsets on
# raw, host1's TSC calibration on auto), and the drift reported against its
# uncertainty (the truth is 0: the hosts share one counter). Prints one table
# row per build, placement, mode, clock and binding. HOSTS="3 4",
# PER_HOST="4", MODES="sidecar" and CLOCKS="auto" run only those.
set -euo pipefail
runs=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
builds=("${@:-now=$here/../build}")
[ "${#builds[@]}" -eq 1 ] && [[ ${builds[0]} != *=* ]] && builds=("now=${builds[0]}")
truth=$here/../tests/hosts/clock_truth.py
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RANKSCOPE_TESTHOSTS_CLUSTER=210
unset OMPI_MCA_rmaps_base_oversubscribe
work=$(mktemp -d)
trap '"$here/../scripts/testhosts.sh" down; rm -rf "$work"' EXIT
echo "date: $(date -u +%F), machine: $(nproc) cores, builds ${builds[*]} (source $(git -C "$here/.." rev-parse --short HEAD))"
for hosts in ${HOSTS:-2 3 4}; do
  "$here/../scripts/testhosts.sh" up "$hosts" --slots 4 --offset-step 3 >/dev/null
  for run in $(seq "$runs"); do
    for per_host in ${PER_HOST:-1 2 4}; do
      for mode in ${MODES:-in-process sidecar}; do
        for clock in ${CLOCKS:-raw auto}; do
          # Open MPI's default binds to cores with 2 ranks or fewer (else to
          # the socket, here all of the machine's cores): only there is
          # "bound" another placement.
          bindings=unbound
          [ $((hosts * per_host)) -le 2 ] && bindings="bound unbound"
          for binding in $bindings; do
            for labelled in "${builds[@]}"; do
              label=${labelled%%=*} build=${labelled#*=}
              bind=()
              [ "$binding" = bound ] && bind=(--bind-to core)
              if [ "$mode" = in-process ]; then
                program=("$build/examples/ddp_sim" --steps 5 --layers 4 --layer-mb 1 --forward-us 500)
                options=()
              else
                program=(/bin/sleep 3)
                options=(--mode sidecar --sync-interval 0.5)
              fi
              rm -rf "$work/job.h5" "$work/job.h5.shards"
              RANKSCOPE_CLOCK=$clock "$here/../scripts/testhosts.sh" mpirun -x RANKSCOPE_CLOCK "${bind[@]}" \
                -n $((hosts * per_host)) --map-by "ppr:$per_host:node" "$build/coordinator/rankscope" run \
                "${options[@]}" -o "$work/job.h5" -- "${program[@]}" >"$work/run.log" 2>&1 ||
                { echo "run failed: $label, $hosts hosts x $per_host, $mode, $clock, $binding" >&2; tail -5 "$work/run.log" >&2; continue; }
              /usr/bin/python3 "$truth" "$work/job.h5" "$clock" "/run/rankscope-testhosts/$RANKSCOPE_TESTHOSTS_CLUSTER/shm" \
                "$(id -u)" samples "$label/$mode/$clock/$binding" >>"$work/samples"
            done
          done
        done
      done
    done
  done
done
/usr/bin/python3 - "$work/samples" <<'PY'
import math, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, hosts, per_host, bound, error, drift, uncertainty = line.split()
    build, mode, clock, binding = label.split("/")
    rows.setdefault((int(hosts), int(per_host), mode, clock, binding, build), []).append(
        (int(bound), int(error), float(drift), float(uncertainty)))
print("| hosts × ranks | mode | clock | binding | build | ranks measured | bound median | bound p90 | bound max | "
      "bounds > 50 µs | abs error max | errors beyond bound | abs drift max | drifts beyond uncertainty |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (hosts, per_host, mode, clock, binding, build), s in sorted(rows.items()):
    bounds = sorted(b for b, _, _, _ in s)
    p90 = bounds[math.ceil(0.9 * len(bounds)) - 1]
    print(f"| {hosts} × {per_host} | {mode} | {clock} | {binding} | {build} | {len(s)} | "
          f"{statistics.median(bounds)/1e3:.1f} µs | {p90/1e3:.1f} µs | {max(bounds)/1e3:.1f} µs | "
          f"{sum(b > 50_000 for b in bounds)} | {max(e for _, e, _, _ in s)/1e3:.2f} µs | {sum(e > b + 2 for b, e, _, _ in s)} | "
          f"{max(abs(d) for _, _, d, _ in s):.2f} ppm | {sum(abs(d) > u for _, _, d, u in s)} |")
PY
