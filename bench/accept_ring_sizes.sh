#!/usr/bin/env bash
# bench/accept_ring_sizes.sh RANKSCOPE RUNS: round 1 of group testing on
# healthy test hosts (scripts/testhosts.sh, as root), `rankscope accept
# --level quick --one-at-a-time --links groups` RUNS times on eight hosts
# (four rings of two) and on nine (three rings of two, one of three): each
# ring's ratio to the median ring, by ring size, and how many runs failed
# something (a ring, a link or a node's network check) or, failing
# nothing, left something to retest. On two shared
# cores, a ring of three is three processes spinning in MPI at once.
# Prints one table row per fleet size, and each failure on stderr.
rankscope=$1 runs=$2
. "$(dirname "$0")/testhosts_env.sh" 213 9

echo "| hosts | runs | rings of 2: ratio (min, median) | rings of 3: ratio (each run) | runs failing something | runs with retests only |"
echo "|---|---|---|---|---|---|"
for hosts in 8 9; do
  for run in $(seq "$runs"); do
    OMPI_MCA_mpi_yield_when_idle=1 "$testhosts" mpirun -n "$hosts" "$rankscope" accept --level quick --one-at-a-time \
      --links groups --format json -o "$work/$hosts-$run.json" >/dev/null 2>&1 || true
  done
  /usr/bin/python3 - "$work" "$hosts" "$runs" <<'PY'
import json, statistics, sys
work, hosts, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
twos, threes, failing, retesting = [], [], 0, 0
for run in range(1, runs + 1):
    try:
        result = json.load(open(f"{work}/{hosts}-{run}.json"))
    except (OSError, ValueError):
        print(f"{hosts} hosts, run {run}: no summary written", file=sys.stderr)
        failing += 1
        continue
    for ring in result["ring_tests"]:
        if ring["round"] == 1:
            (twos if len(ring["hosts"]) == 2 else threes).append(ring["ratio"])
    networks = [c for n in result["nodes"] for c in n["checks"] if c["name"] == "network"]
    verdicts = {x["verdict"] for x in result["ring_tests"] + result["links"] + networks}
    failing += "fail" in verdicts
    for x in result["ring_tests"] + result["links"]:
        if x["verdict"] == "fail":
            print(f"{hosts} hosts, run {run}: {'pair' if x.get('pair') else 'ring' if 'pair' in x else 'link'} "
                  f"{'-'.join(x['hosts'])} fails", file=sys.stderr)
    for n in result["nodes"]:
        for c in n["checks"]:
            if c["name"] == "network" and c["verdict"] == "fail":
                print(f"{hosts} hosts, run {run}: {n['host']} fails network: {c['value']}", file=sys.stderr)
    retesting += "fail" not in verdicts and "retest" in verdicts
three_text = ", ".join(f"{r:.2f}" for r in threes) or "none"
print(f"| {hosts} | {runs} | {min(twos):.2f}, {statistics.median(twos):.2f} | {three_text} | {failing} | {retesting} |")
PY
done
