#!/usr/bin/env bash
# bench/accept_detection.sh RANKSCOPE RUNS: how often `rankscope accept
# --level quick --one-at-a-time` on four test hosts (scripts/testhosts.sh,
# as root) finds a subtle fault, and how often it flags a healthy host.
# Faults on host2: none; its CPUs at 80 % and at 70 % of their throughput;
# its link at 70 % of the healthy links' median bandwidth (tc tbf, both
# ways). A CPU fault is a CPU quota granted per 10 ms, calibrated first: the
# quota at which host2's GEMM figure, as accept measures it alone on host2,
# is the fraction asked of its figure without a quota (a quota of P % of a
# core does not take away what it says: this VM's two vCPUs give about 1.85
# cores of work, and the period decides how much of the rest is taken).
# The table gives what each fault did as accept saw it: host2's ratio on
# the check (and for the link, its links' bandwidth and speed, 1/latency,
# against the median link). Prints the calibration on stderr, then one
# table row per fault.
rankscope=$1 runs=$2
. "$(dirname "$0")/testhosts_env.sh" 211 4
# Open MPI yields while it waits: the four hosts share two cores (docs/accept.md, "Collectives").
accept() { OMPI_MCA_mpi_yield_when_idle=1 "$testhosts" mpirun -n 4 "$rankscope" accept --level quick --one-at-a-time --format json >"$1" 2>/dev/null || true; }

# host2's compute figure (the upper quartile of its GEMM repeats, as the verdict takes it), accept alone on host2.
compute_alone() {
  "$testhosts" exec host2 "$rankscope" accept --format json 2>/dev/null | /usr/bin/python3 -c 'import json, statistics, sys
print(statistics.quantiles(json.load(sys.stdin)["nodes"][0]["gemm_gflops"], n=4)[2])'
}
# The quota (percent of a core, per 10 ms) that brings host2's compute to FRACTION of UNTHROTTLED:
# a guess, then corrections in proportion, the figure of each the median of three runs; the quota
# kept is the median of the quotas each measurement asks for, so that one stray figure moves it little.
calibrate() {
  local fraction=$1 unthrottled=$2 percent figure asked=()
  percent=$(/usr/bin/python3 -c "print(round(185 * $fraction))")
  for _ in 1 2 3 4 5; do
    "$testhosts" throttle host2 "$percent" 10
    figure=$(for _ in 1 2 3; do compute_alone; done | sort -g | sed -n 2p)
    echo "  quota $percent % per 10 ms: $figure GFLOP/s, $(/usr/bin/python3 -c "print(round($figure / $unthrottled, 3))") of unthrottled" >&2
    percent=$(/usr/bin/python3 -c "print(max(1, round($percent * $fraction * $unthrottled / $figure)))")
    asked+=("$percent")
  done
  "$testhosts" heal host2
  printf '%s\n' "${asked[@]}" | sort -n | sed -n 3p
}

unthrottled=$(for _ in 1 2 3; do compute_alone; done | sort -g | sed -n 2p)
echo "host2 alone: compute $unthrottled GFLOP/s without a quota" >&2
echo "calibrating the CPU at 80 %:" >&2
cpu80=$(calibrate 0.8 "$unthrottled")
echo "calibrating the CPU at 70 %:" >&2
cpu70=$(calibrate 0.7 "$unthrottled")
echo "quotas: cpu80 $cpu80 %, cpu70 $cpu70 % of a core per 10 ms" >&2

accept "$work/baseline.json"
healthy_gbps=$(/usr/bin/python3 -c 'import json, statistics, sys
print(statistics.median(l["bandwidth_gbps"] for l in json.load(open(sys.argv[1]))["links"]))' "$work/baseline.json")
link_rate="$(/usr/bin/python3 -c "print(int(0.7 * $healthy_gbps * 8000))")mbit"
echo "healthy links: median $healthy_gbps GB/s; the slowed link: $link_rate" >&2

echo "| fault on host2 | runs | host2 failed (on that check) | host2 retest | host2's ratio (median) | healthy hosts flagged (fail or retest) | links flagged that avoid host2 |"
echo "|---|---|---|---|---|---|---|"
for fault in none cpu80 cpu70 link70; do
  "$testhosts" heal host2
  case $fault in
    cpu80) "$testhosts" throttle host2 "$cpu80" 10 ;;
    cpu70) "$testhosts" throttle host2 "$cpu70" 10 ;;
    link70) "$testhosts" slow host2 "$link_rate" ;;
  esac
  for run in $(seq "$runs"); do accept "$work/$fault-$run.json"; done
  /usr/bin/python3 - "$fault" "$runs" "$work" <<'PY'
import json, statistics, sys
fault, runs, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
check = {"none": None, "cpu80": "compute", "cpu70": "compute", "link70": "network"}[fault]
failed = retest = others = links = 0
ratios, bandwidths, latencies = [], [], []
for run in range(1, runs + 1):
    result = json.load(open(f"{work}/{fault}-{run}.json"))
    for node in result["nodes"]:
        if node["host"] == "host2" and check:
            checks = {c["name"]: c for c in node["checks"]}
            failed += checks[check]["verdict"] == "fail"
            retest += checks[check]["verdict"] == "retest"
            if checks[check]["ratio"] is not None:
                ratios.append(checks[check]["ratio"])
        elif node["verdict"] != "pass":
            others += 1
    links += sum(1 for l in result["links"] if "host2" not in l["hosts"] and l["verdict"] != "pass")
    if check == "network":  # what the fault did to host2's links, against the median link
        bandwidths.append(statistics.median(l["bandwidth_ratio"] for l in result["links"] if "host2" in l["hosts"]))
        latencies.append(statistics.median(l["latency_ratio"] for l in result["links"] if "host2" in l["hosts"]))
shown = lambda n: f"{n} of {runs}" if check else "—"
ratio = f"{statistics.median(ratios):.2f}" if ratios else "—"
if bandwidths:
    ratio += f" (its links: bandwidth {statistics.median(bandwidths):.2f}, speed {statistics.median(latencies):.2f})"
print(f"| {fault} | {runs} | {shown(failed)} | {shown(retest)} | {ratio} | {others} of {runs * (3 if check else 4)} | {links} of {runs * 3} |")
PY
done
