#!/usr/bin/env bash
# bench/accept_group_hosts.sh RANKSCOPE RUNS: group testing against all pairs
# on eight test hosts (scripts/testhosts.sh, as root), `rankscope accept
# --level quick --one-at-a-time`: how long the link stage takes, how many
# tests it makes, and what it finds. Faults on host6: none; its link at
# 200 Mbit/s; its link at 70 % of the healthy rings' median (tc tbf, both
# ways). Pairs runs once per fault, groups RUNS times. Prints one table row
# per screen and fault.
rankscope=$1 runs=$2
. "$(dirname "$0")/testhosts_env.sh" 212 8
# Each progress line stamped with the time it came, to time the link stage.
accept() {
  local screen=$1 out=$2
  OMPI_MCA_mpi_yield_when_idle=1 "$testhosts" mpirun -n 8 "$rankscope" accept --level quick --one-at-a-time \
    --links "$screen" --format json -o "$out" 2>&1 >/dev/null |
    while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N)" "$line"; done >"$out.log" || true
}

accept groups "$work/baseline.json"
ring_gbps=$(/usr/bin/python3 -c 'import json, statistics, sys
print(statistics.median(r["gbps"] for r in json.load(open(sys.argv[1]))["ring_tests"] if r["round"] == 1))' "$work/baseline.json")
link_rate="$(/usr/bin/python3 -c "print(int(0.7 * $ring_gbps * 8000))")mbit"
echo "healthy rings: median $ring_gbps GB/s; the slowed link: $link_rate" >&2

echo "| screen | fault on host6 | runs | link stage (s, median) | ring tests | pair tests | links measured | host6 fails network | host6 retest | others failing network | others retest | links failed that avoid host6 |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for fault in none slow200 link70; do
  "$testhosts" heal host6
  case $fault in
    slow200) "$testhosts" slow host6 200mbit ;;
    link70) "$testhosts" slow host6 "$link_rate" ;;
  esac
  for screen in pairs groups; do
    count=$runs
    [ "$screen" = pairs ] && count=1
    for run in $(seq "$count"); do accept "$screen" "$work/$screen-$fault-$run.json"; done
    /usr/bin/python3 - "$screen" "$fault" "$count" "$work" <<'PY'
import json, statistics, sys
screen, fault, runs, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
stage, rings, pairs, links, failed, retest, others, others_retest, bad_links = [], [], [], [], 0, 0, 0, 0, 0
for run in range(1, runs + 1):
    path = f"{work}/{screen}-{fault}-{run}.json"
    result = json.load(open(path))
    stamps = [line.split(" ", 1) for line in open(path + ".log")]
    began = next(float(t) for t, text in stamps if ": links:" in text)
    ended = next(float(t) for t, text in stamps if ": collectives:" in text)
    stage.append(ended - began)
    rings.append(sum(1 for r in result["ring_tests"] if not r["pair"]))
    pairs.append(sum(1 for r in result["ring_tests"] if r["pair"]))
    links.append(len(result["links"]))
    for node in result["nodes"]:
        network = [c["verdict"] for c in node["checks"] if c["name"] == "network"]
        verdict = network[0] if network else "pass"
        if node["host"] == "host6":
            failed += verdict == "fail"
            retest += verdict == "retest"
        else:
            others += verdict == "fail"
            others_retest += verdict == "retest"
    bad_links += sum(1 for l in result["links"] if "host6" not in l["hosts"] and l["verdict"] == "fail")
print(f"| {screen} | {fault} | {runs} | {statistics.median(stage):.1f} | {statistics.median(rings):g} | "
      f"{statistics.median(pairs):g} | {statistics.median(links):g} | {failed} of {runs} | {retest} of {runs} | "
      f"{others} of {runs * 7} | {others_retest} of {runs * 7} | {bad_links} |")
PY
  done
done
