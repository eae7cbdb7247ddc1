#!/usr/bin/env bash
# bench/accept_detection.sh RANKSCOPE RUNS: how often `rankscope accept
# --level quick --one-at-a-time` on four test hosts (scripts/testhosts.sh,
# as root) finds a subtle fault, and how often it flags a healthy host.
# Faults on host2: none; its CPUs at 80 % (a quota of 1.6 of its 2 cores,
# granted per 10 ms so that it slows a GEMM of tens of ms too);
# its link at 70 % of the healthy links' median bandwidth (tc tbf, both ways).
# Prints one table row per fault.
rankscope=$1 runs=$2
. "$(dirname "$0")/testhosts_env.sh" 211 4
# Open MPI yields while it waits: the four hosts share two cores (docs/accept.md, "Collectives").
accept() { OMPI_MCA_mpi_yield_when_idle=1 "$testhosts" mpirun -n 4 "$rankscope" accept --level quick --one-at-a-time --format json >"$1" 2>/dev/null || true; }

accept "$work/baseline.json"
healthy_gbps=$(/usr/bin/python3 -c 'import json, statistics, sys
print(statistics.median(l["bandwidth_gbps"] for l in json.load(open(sys.argv[1]))["links"]))' "$work/baseline.json")
link_rate="$(/usr/bin/python3 -c "print(int(0.7 * $healthy_gbps * 8000))")mbit"
echo "healthy links: median $healthy_gbps GB/s; the slowed link: $link_rate" >&2

echo "| fault on host2 | runs | host2 failed (on that check) | host2 retest | healthy hosts flagged (fail or retest) | links flagged that avoid host2 |"
echo "|---|---|---|---|---|---|"
for fault in none cpu80 link70; do
  "$testhosts" heal host2
  case $fault in
    cpu80) "$testhosts" throttle host2 160 10 ;;
    link70) "$testhosts" slow host2 "$link_rate" ;;
  esac
  for run in $(seq "$runs"); do accept "$work/$fault-$run.json"; done
  /usr/bin/python3 - "$fault" "$runs" "$work" <<'PY'
import json, sys
fault, runs, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
check = {"none": None, "cpu80": "compute", "link70": "network"}[fault]
failed = retest = others = links = 0
for run in range(1, runs + 1):
    result = json.load(open(f"{work}/{fault}-{run}.json"))
    for node in result["nodes"]:
        if node["host"] == "host2" and check:
            verdicts = {c["name"]: c["verdict"] for c in node["checks"]}
            failed += verdicts.get(check) == "fail"
            retest += verdicts.get(check) == "retest"
        elif node["verdict"] != "pass":
            others += 1
    links += sum(1 for l in result["links"] if "host2" not in l["hosts"] and l["verdict"] != "pass")
shown = lambda n: f"{n} of {runs}" if check else "—"
print(f"| {fault} | {runs} | {shown(failed)} | {shown(retest)} | {others} of {runs * (3 if check else 4)} | {links} of {runs * 3} |")
PY
done
