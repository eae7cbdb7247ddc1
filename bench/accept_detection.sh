#!/usr/bin/env bash
# bench/accept_detection.sh RANKSCOPE RUNS: how often `rankscope accept
# --level quick --one-at-a-time` on four test hosts (scripts/testhosts.sh,
# as root) finds a subtle fault, and how often it flags a healthy host.
# Faults on host2: none; its CPUs at 80 % and at 70 % of their throughput;
# its link at 70 % of the healthy links' median bandwidth (tc tbf, both
# ways). A CPU fault is a CPU quota granted per 10 ms. Each fault is
# calibrated first by runs of accept on the four hosts (calibrate, below):
# calibrated on host2 alone, the same quota took less in the fleet's runs.
# The table gives what each fault did as accept saw it: host2's ratio on
# the check (and for the link, its links' bandwidth and speed, 1/latency,
# against the median link). Prints the calibration on stderr, then one
# table row per fault. FAULTS="link70 ..." runs only those named.
rankscope=$1 runs=$2
. "$(dirname "$0")/testhosts_env.sh" 211 4
# Open MPI yields while it waits: the four hosts share two cores (docs/accept-reference.md, "Collectives").
accept() { OMPI_MCA_mpi_yield_when_idle=1 "$testhosts" mpirun -n 4 "$rankscope" accept --level quick --one-at-a-time --format json >"$1" 2>/dev/null || true; }

# Puts FAULT (cpu: a CPU quota of SETTING % of a core per 10 ms; link: a rate of SETTING Mbit/s both
# ways, with a bucket of 512 KiB, which a 4 MiB transfer at GB/s does not run dry between ticks as
# it does a 64 KiB one: with that, every rate gave about 0.43 of the median link) on host2, healed first.
put_fault() {
  "$testhosts" heal host2
  case $1 in
    cpu) "$testhosts" throttle host2 "$2" 10 ;;
    link) "$testhosts" slow host2 "${2}mbit" 512kb ;;
  esac
}
# What FAULT did to host2 in a run of accept on the four hosts: its compute ratio to the fleet's
# median, or its links' median bandwidth ratio to the median link.
ratio_of() {
  accept "$work/calibration.json"
  /usr/bin/python3 - "$1" "$work/calibration.json" <<'PY'
import json, statistics, sys
result = json.load(open(sys.argv[2]))
if sys.argv[1] == "cpu":
    [node] = [n for n in result["nodes"] if n["host"] == "host2"]
    print([c for c in node["checks"] if c["name"] == "compute"][0]["ratio"])
else:
    print(statistics.median(l["bandwidth_ratio"] for l in result["links"] if "host2" in l["hosts"]))
PY
}
# The setting of FAULT that brings host2 to FRACTION, from START: corrections in proportion, each
# from one run of accept; the setting kept is the median of those the runs ask for, so that one
# stray run moves it little. A quota of P % of a core does not take away what it says (this VM's
# two vCPUs give about 1.85 cores of work, and the period decides how much of the rest is taken),
# nor does a tbf rate give exactly what it says on these veths, so both are calibrated.
calibrate() {
  local kind=$1 fraction=$2 setting=$3 ratio asked=()
  for _ in 1 2 3 4 5; do
    put_fault "$kind" "$setting"
    ratio=$(ratio_of "$kind")
    echo "  $kind $setting: host2 at $ratio" >&2
    setting=$(/usr/bin/python3 -c "print(max(1, round($setting * $fraction / max($ratio, 0.01))))")
    asked+=("$setting")
  done
  "$testhosts" heal host2
  printf '%s\n' "${asked[@]}" | sort -n | sed -n 3p
}

accept "$work/baseline.json"
healthy_gbps=$(/usr/bin/python3 -c 'import json, statistics, sys
print(statistics.median(l["bandwidth_gbps"] for l in json.load(open(sys.argv[1]))["links"]))' "$work/baseline.json")
echo "healthy links: median $healthy_gbps GB/s" >&2
faults=${FAULTS:-none cpu80 cpu70 link70}
wanted() { [[ " $faults " == *" $1 "* ]]; }
if wanted cpu80; then
  echo "calibrating the CPU at 80 % (quota, % of a core per 10 ms):" >&2
  cpu80=$(calibrate cpu 0.8 160)
  echo "cpu80: a quota of $cpu80 %" >&2
fi
if wanted cpu70; then
  echo "calibrating the CPU at 70 %:" >&2
  cpu70=$(calibrate cpu 0.7 140)
  echo "cpu70: a quota of $cpu70 %" >&2
fi
if wanted link70; then
  echo "calibrating the link at 70 % (tbf rate, Mbit/s):" >&2
  link70=$(calibrate link 0.7 "$(/usr/bin/python3 -c "print(int(0.7 * $healthy_gbps * 8000))")")
  echo "link70: a rate of $link70 Mbit/s" >&2
fi

echo "| fault on host2 | runs | host2 failed (on that check) | host2 retest | host2's ratio (median) | healthy hosts flagged (fail or retest) | links flagged that avoid host2 |"
echo "|---|---|---|---|---|---|---|"
for fault in $faults; do
  "$testhosts" heal host2
  case $fault in
    cpu80) put_fault cpu "$cpu80" ;;
    cpu70) put_fault cpu "$cpu70" ;;
    link70) put_fault link "$link70" ;;
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
