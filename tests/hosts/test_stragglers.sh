#!/usr/bin/env bash
# The straggler report on test hosts with a fault switched on: one host's CPU
# throttled (cgroup quota) names that host's rank, "slow compute", and no
# healthy host.
# Usage: test_stragglers.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 203
rankscope=$1 ddp_sim=$2

# Checks that the report of TIMELINE names exactly the ranks on HOST, each
# for CAUSE.
expect_stragglers() {
  local timeline=$1 host=$2 cause=$3
  "$rankscope" report "$timeline" | sed -n '/^stragglers/,/^$/p'
  "$rankscope" report "$timeline" --format json -o "$timeline.report.json"
  "$rankscope" info --json "$timeline" >"$timeline.info.json"
  /usr/bin/python3 - "$timeline" "$host" "$cause" <<'PY'
import json, sys
timeline, host, cause = sys.argv[1:]
hosts = {r["rank"]: r["host"] for r in json.load(open(timeline + ".info.json"))["ranks"]}
stragglers = json.load(open(timeline + ".report.json"))["stragglers"]
named = {s["rank"]: s["cause"] for s in stragglers}
want = {r: cause for r, h in hosts.items() if h == host}
assert named == want, f"named {named}, expected {want} (ranks by host: {hosts})"
PY
}

echo "== host2's CPU throttled"
hosts up 3 --slots 1 >/dev/null
hosts throttle host2 30
# Compute spins: the quota slows what runs on a core.
hosts mpirun -n 3 "$rankscope" run -o slow-cpu.h5 -- "$ddp_sim" --steps 16 --layers 8 --layer-mb 1 \
  --forward-us 2000 --compute spin >slow-cpu.log 2>&1 || { cat slow-cpu.log; fail "the run failed"; }
expect_stragglers slow-cpu.h5 host2 "slow compute"
echo "stragglers across hosts ok"
