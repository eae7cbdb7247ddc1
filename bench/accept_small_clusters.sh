#!/usr/bin/env bash
# bench/accept_small_clusters.sh RANKSCOPE RUNS [SIZES]: how `rankscope
# accept --level quick --one-at-a-time` judges small clusters of test hosts
# (scripts/testhosts.sh, as root, one rank a host): RUNS healthy runs and
# RUNS runs with the last host's link at 200 Mbit/s both ways, on each
# cluster size of SIZES (default "3 4 8"). One table row per size and fault:
# the run's verdict, what the slowed host got on `network`, and every flag
# (fail or retest) of a healthy host, by check: a healthy run's flags are
# the false alarms. FAULTS="none slow" limits the faults.
rankscope=$1 runs=$2 sizes=${3:-3 4 8}
largest=$(printf '%s\n' $sizes | sort -n | tail -1)
. "$(dirname "$0")/testhosts_env.sh" 212 "$largest"
# Open MPI yields while it waits: the hosts share two cores (docs/accept-reference.md, "Collectives").
accept() {
  OMPI_MCA_mpi_yield_when_idle=1 "$testhosts" mpirun -n "$1" --map-by node "$rankscope" accept --level quick \
    --one-at-a-time --format json >"$2" 2>/dev/null || true
}

echo "| hosts | fault | runs | verdict fail | slowed host: network (ratio, median) | healthy hosts flagged (host-runs) | flags by check | links failed that avoid the slowed host |"
echo "|---|---|---|---|---|---|---|---|"
for hosts in $sizes; do
  slowed=host$hosts
  for fault in ${FAULTS:-none slow}; do
    "$testhosts" heal "$slowed"
    [[ $fault == slow ]] && "$testhosts" slow "$slowed" 200mbit
    for run in $(seq "$runs"); do accept "$hosts" "$work/$hosts-$fault-$run.json"; done
    "$testhosts" heal "$slowed"
    /usr/bin/python3 - "$hosts" "$fault" "$runs" "$work" "$slowed" <<'PY'
import collections, json, statistics, sys
hosts, fault, runs, work, slowed = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
failed_runs, network, ratios, flagged, links = 0, collections.Counter(), [], 0, 0
by_check = collections.Counter()
for run in range(1, runs + 1):
    try:
        result = json.load(open(f"{work}/{hosts}-{fault}-{run}.json"))
    except (OSError, ValueError):
        by_check["no result"] += 1
        continue
    failed_runs += result["verdict"] == "fail"
    for node in result["nodes"]:
        if fault == "slow" and node["host"] == slowed:
            [check] = [c for c in node["checks"] if c["name"] == "network"]
            network[check["verdict"]] += 1
            ratios.append(check["ratio"])
            continue
        flags = [f'{c["name"]} {c["verdict"]}' for c in node["checks"] if c["verdict"] != "pass"]
        flagged += bool(flags)
        by_check.update(flags)
    links += sum(1 for l in result["links"] if slowed not in l["hosts"] and l["verdict"] != "pass")
slowed_text = "—"
if fault == "slow":
    slowed_text = ", ".join(f"{v} {n} of {runs}" for v, n in sorted(network.items()))
    if ratios:
        slowed_text += f" ({statistics.median(ratios):.3f})"
healthy = hosts - (fault == "slow")
checks = ", ".join(f"{name}: {n}" for name, n in sorted(by_check.items())) or "none"
print(f"| {hosts} | {fault} | {runs} | {failed_runs} of {runs} | {slowed_text} | {flagged} of {healthy * runs} | {checks} | {links} |")
PY
  done
done
