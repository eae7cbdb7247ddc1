#!/usr/bin/env bash
# The straggler report on test hosts: healthy hosts name no one; one host's
# link slowed (tc tbf, both ways) names that host's ranks, "slow link or node
# network"; one host's CPU throttled (cgroup quota) names that host's rank,
# "slow compute". No healthy host is named. testhosts.sh throttle grants its
# quota per the period asked for, and refuses a period out of range.
# Usage: test_stragglers.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 203
rankscope=$1 ddp_sim=$2

# Checks that the report of TIMELINE names exactly the ranks on HOST (none
# for "-"), each for CAUSE.
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

# Compute sleeps: every host shares this machine's two cores, and the link is
# what differs. Every collective spans every host, as in one DDP group.
ddp_sleeping=("$ddp_sim" --steps 12 --layers 8 --layer-mb 1 --forward-us 2000 --compute sleep)
hosts up 3 --slots 2 >/dev/null
echo "== healthy hosts"
hosts mpirun -n 6 "$rankscope" run -o healthy.h5 -- "${ddp_sleeping[@]}" >healthy.log 2>&1 ||
  { cat healthy.log; fail "the run failed"; }
expect_stragglers healthy.h5 - -

echo "== host3's link slowed"
hosts slow host3 400mbit
hosts mpirun -n 6 "$rankscope" run -o slow-link.h5 -- "${ddp_sleeping[@]}" >slow-link.log 2>&1 ||
  { cat slow-link.log; fail "the run failed"; }
expect_stragglers slow-link.h5 host3 "slow link or node network"

echo "== host2's CPU throttled"
hosts up 3 --slots 1 >/dev/null
hosts throttle host2 25
# Compute spins: the quota slows what runs on a core.
hosts mpirun -n 3 "$rankscope" run -o slow-cpu.h5 -- "$ddp_sim" --steps 16 --layers 8 --layer-mb 1 \
  --forward-us 2000 --compute spin >slow-cpu.log 2>&1 || { cat slow-cpu.log; fail "the run failed"; }
expect_stragglers slow-cpu.h5 host2 "slow compute"

echo "== a quota granted per 10 ms, and a period out of range refused"
hosts throttle host2 80 10
group=$(hosts exec host2 cat /proc/self/cgroup | awk -F: '$2 ~ /(^|,)cpu(,|$)/ || $2 == "" { print $3; exit }')
if [ -f "/sys/fs/cgroup/cpu$group/cpu.cfs_quota_us" ]; then
  quota="$(cat "/sys/fs/cgroup/cpu$group/cpu.cfs_quota_us") $(cat "/sys/fs/cgroup/cpu$group/cpu.cfs_period_us")"
else
  quota=$(cat "/sys/fs/cgroup$group/cpu.max")
fi
[ "$quota" = "8000 10000" ] || fail "throttle host2 80 10 set quota and period '$quota', expected '8000 10000'"
status=0
hosts throttle host2 80 2000 2>period.log || status=$?
[ "$status" -ne 0 ] && grep -q "throttle: the period is 1-1000 ms" period.log || { cat period.log; fail "a period of 2000 ms"; }
echo "stragglers across hosts ok"
