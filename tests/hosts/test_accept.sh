#!/usr/bin/env bash
# `rankscope accept --level quick` on four test hosts, one rank each: healthy
# hosts pass with nothing failed (twice: no false alarm); one host's CPU
# throttled fails that host on compute (its memory figure may go too: the
# triad runs on that CPU) and no other host; one host's link slowed fails
# that host on network and exactly its links. Each run well under a minute.
# Every run reports every collective over all four hosts and over the two
# groups of two, and fails none of them (two groups are not judged against
# their peers).
# Usage: test_accept.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 206
rankscope=$1
hosts up 4 --slots 1 >/dev/null

# Runs accept as NAME; checks its exit status, that exactly the hosts
# FAILED_HOSTS (comma-separated, "-" for none) fail, on CHECK, and the
# links: LINKS is "-" (no link fails), "exactly:HOST"
# (exactly HOST's links fail) or "only:HOST" (no link fails that avoids
# HOST: a throttled host's links may be slower too, its network stack runs
# on its CPU). A node or link may be marked retest: on these shared cores a
# healthy memory figure or link now and then dips below 0.8 of the median
# within the fleet's noise (bench/RESULTS.md), and retest is the verdict for
# that; only a failure is a false alarm.
accept() {
  local name=$1 want_status=$2 failed_hosts=$3 check=$4 links=$5 status=0 started
  started=$(date +%s)
  # The four hosts share two cores, and full-scale collectives run on all
  # four at once. Ranks that spin while they wait take the cores of the
  # ranks they wait for (8-32 ms for 8 B), and a host throttled to 25 % of a
  # core spends its quota spinning: the throttled run took over 3 minutes.
  # Yielding ranks take 0.1-0.3 ms.
  OMPI_MCA_mpi_yield_when_idle=1 \
    hosts mpirun -n 4 "$rankscope" accept --level quick --one-at-a-time --format json >"$name.json" 2>"$name.log" || status=$?
  echo "$name: exit status $status in $(($(date +%s) - started)) s"
  [ -s "$name.json" ] || { cat "$name.log"; fail "$name: no JSON (exit status $status)"; }
  [ $(($(date +%s) - started)) -lt 60 ] || fail "$name: quick took a minute or more"
  # The figures first: where the verdict is not the one expected, they say why.
  /usr/bin/python3 - "$name.json" "$failed_hosts" "$check" "$links" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
failed_hosts = set() if sys.argv[2] == "-" else set(sys.argv[2].split(","))
check, links = sys.argv[3], sys.argv[4]
for node in result["nodes"]:
    figures = {c["name"]: (c["verdict"], c["value"], round(c["ratio"], 2)) for c in node["checks"] if not c["name"].startswith("inventory")}
    print(" ", node["host"], node["verdict"], figures)
for link in result["links"]:
    print(" ", "-".join(link["hosts"]), link["verdict"], round(link["bandwidth_gbps"], 3), "GB/s", round(link["latency_us"], 1), "us", link["cause"])
assert result["verdict"] == ("fail" if failed_hosts else "pass"), result["verdict"]
assert {n["host"] for n in result["nodes"]} == {"host1", "host2", "host3", "host4"}
assert {n["host"] for n in result["nodes"] if n["verdict"] == "fail"} == failed_hosts, "nodes failed"
# The check named must fail. A throttled CPU may slow the node's memory
# figure too (the triad runs on it); a slowed link, nothing but the network.
for node in result["nodes"]:
    if node["host"] in failed_hosts:
        failing = {c["name"] for c in node["checks"] if c["verdict"] == "fail"}
        assert check in failing and failing <= {check, "memory" if check == "compute" else check}, (node["host"], failing)
hosts = [n["host"] for n in result["nodes"]]  # in rank order, as the groups take them
for c in result["collectives"]:
    print(" ", c["collective"], c["scope"], "-".join(c["hosts"]), c["verdict"], round(c["peak_busbw_gbps"], 3), "GB/s busbw peak",
          round(c["points"][0]["time_us"], 1), "us at", c["points"][0]["bytes"], "B")
scopes = {(c["collective"], c["scope"], tuple(c["hosts"])) for c in result["collectives"]}
for collective in ("allreduce", "allgather", "reduce_scatter", "alltoall"):
    assert {(collective, "full", tuple(hosts)), (collective, "group", tuple(hosts[:2])),
            (collective, "group", tuple(hosts[2:]))} == {s for s in scopes if s[0] == collective}, scopes
for c in result["collectives"]:
    sizes = [p["bytes"] for p in c["points"]]
    assert sizes == sorted(set(sizes)) and sizes[-1] >= 1 << 20, sizes
    assert min(p["busbw_gbps"] for p in c["points"]) > 0, c
    assert c["verdict"] == "pass" and c["ratio"] is None, c
link_host = links.split(":")[-1]
failed = {tuple(l["hosts"]) for l in result["links"] if l["verdict"] == "fail"}
its_links = {tuple(l["hosts"]) for l in result["links"] if link_host in l["hosts"]}
if links.startswith("exactly:"):
    assert failed == its_links, ("failed links", failed, "expected", its_links)
else:
    assert failed <= its_links, ("failed links", failed)
PY
  [ "$status" -eq "$want_status" ] || fail "$name: exit status $status, expected $want_status"
}

accept healthy 0 - - -
accept healthy-again 0 - - -
hosts throttle host2 25
accept throttled 1 host2 compute only:host2
hosts heal host2
hosts slow host3 200mbit
accept slow-link 1 host3 network exactly:host3
echo "accept on test hosts ok"
