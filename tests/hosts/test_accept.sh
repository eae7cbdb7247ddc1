#!/usr/bin/env bash
# `rankscope accept --level quick` on four test hosts, one rank each: healthy
# hosts pass with nothing flagged (twice: no false alarm); one host's CPU
# throttled fails that host on compute and nothing else; one host's link
# slowed fails that host on network and exactly its links. Each run well
# under a minute.
# Usage: test_accept.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 206
rankscope=$1
hosts up 4 --slots 1 >/dev/null

# Runs accept as NAME; checks its exit status and that exactly the hosts
# FAILED_HOSTS (comma-separated, "-" for none) fail, for CHECK, and that the
# failed links are exactly those of LINK_HOST (or none).
accept() {
  local name=$1 want_status=$2 failed_hosts=$3 check=$4 link_host=$5 status=0 started
  started=$(date +%s)
  hosts mpirun -n 4 "$rankscope" accept --level quick --one-at-a-time --format json >"$name.json" 2>"$name.log" || status=$?
  echo "$name: exit status $status in $(($(date +%s) - started)) s"
  [ "$status" -eq "$want_status" ] || { cat "$name.log"; fail "$name: exit status $status, expected $want_status"; }
  [ $(($(date +%s) - started)) -lt 60 ] || fail "$name: quick took a minute or more"
  /usr/bin/python3 - "$name.json" "$failed_hosts" "$check" "$link_host" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
failed_hosts = set() if sys.argv[2] == "-" else set(sys.argv[2].split(","))
check, link_host = sys.argv[3], sys.argv[4]
for node in result["nodes"]:
    figures = {c["name"]: (c["verdict"], c["value"], round(c["ratio"], 2)) for c in node["checks"] if not c["name"].startswith("inventory")}
    print(" ", node["host"], node["verdict"], figures)
for link in result["links"]:
    print(" ", "-".join(link["hosts"]), link["verdict"], round(link["bandwidth_gbps"], 3), "GB/s", round(link["latency_us"], 1), "us", link["cause"])
assert result["verdict"] == ("fail" if failed_hosts else "pass"), result["verdict"]
assert {n["host"] for n in result["nodes"]} == {"host1", "host2", "host3", "host4"}
assert {n["host"] for n in result["nodes"] if n["verdict"] != "pass"} == failed_hosts, "nodes not passed"
for node in result["nodes"]:
    if node["host"] in failed_hosts:
        failing = {c["name"] for c in node["checks"] if c["verdict"] == "fail"}
        assert failing == {check}, (node["host"], failing)
bad_links = {tuple(l["hosts"]) for l in result["links"] if l["verdict"] != "pass"}
want_links = {tuple(l["hosts"]) for l in result["links"] if link_host in l["hosts"]}
assert bad_links == want_links, (bad_links, want_links)
PY
}

accept healthy 0 - - -
accept healthy-again 0 - - -
hosts throttle host2 25
accept throttled 1 host2 compute -
hosts heal host2
hosts slow host3 200mbit
accept slow-link 1 host3 network host3
echo "accept on test hosts ok"
