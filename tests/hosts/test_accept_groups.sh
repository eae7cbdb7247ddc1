#!/usr/bin/env bash
# `rankscope accept --links groups` (group testing) on eight test hosts, one
# rank each: healthy hosts take one round of four rings of two, then pairs of
# sound nodes, and no node fails network nor any link; with host6's link
# slowed, its ring fails, bisection leaves host5 and host6, host6 fails
# network (slow with a node known sound too), host5 is cleared by it, no
# other node fails network, and the run fails (or, now and then on these
# shared cores, host6's ring is to be retested, and nothing else). Compute, memory and the
# reference job are accept's other checks (hosts.accept), and on eight hosts
# sharing two cores they are left unjudged here.
# Usage: test_accept_groups.sh RANKSCOPE
. "$(dirname "$0")/common.sh" 207
rankscope=$1
hosts up 8 --slots 1 >/dev/null

# Runs accept as NAME with group testing; checks its exit status when
# WANT_STATUS is given, that exactly FAILED (comma-separated, "-" for none)
# fail network, and prints the rings and links.
accept_groups() {
  local name=$1 want_status=$2 failed=$3 status=0 started
  started=$(date +%s)
  OMPI_MCA_mpi_yield_when_idle=1 \
    hosts mpirun -n 8 "$rankscope" accept --level quick --one-at-a-time --links groups --format json -o "$name.json" \
    2>"$name.log" || status=$?
  echo "$name: exit status $status in $(($(date +%s) - started)) s"
  [ -s "$name.json" ] || { cat "$name.log"; fail "$name: no JSON (exit status $status)"; }
  grep -q "links: group tests, round 1: 4 rings of 2, 2, 2, 2 nodes" "$name.log" || { cat "$name.log"; fail "$name: no first round of 4 rings"; }
  /usr/bin/python3 - "$name.json" "$failed" <<'PY' | tee "$name.check"
import json, sys
result = json.load(open(sys.argv[1]))
failed = set() if sys.argv[2] == "-" else set(sys.argv[2].split(","))
assert result["link_screen"] == "group_testing", result["link_screen"]
for ring in result["ring_tests"]:
    print("  round", ring["round"], "pair" if ring["pair"] else "ring", "-".join(ring["hosts"]), ring["verdict"],
          round(ring["gbps"], 3), "GB/s", round(ring["ratio"], 2))
for link in result["links"]:
    print("  link", "-".join(link["hosts"]), link["verdict"], round(link["bandwidth_gbps"], 3), "GB/s", link["cause"])
network = {}
for node in result["nodes"]:
    [check] = [c for c in node["checks"] if c["name"] == "network"]
    network[node["host"]] = check
    print("  ", node["host"], check["verdict"], check["value"])
first = [r for r in result["ring_tests"] if r["round"] == 1]
assert [r["hosts"] for r in first] == [["host1", "host2"], ["host3", "host4"], ["host5", "host6"], ["host7", "host8"]], first
failing = {h for h, c in network.items() if c["verdict"] == "fail"}
if failed and not failing:
    # On these shared cores a healthy ring now and then strays far enough from the others that the
    # spread about the median ring hides the slow one (1 run of 5 in bench/RESULTS.md): then that ring
    # is to be retested, with its nodes, and nothing else.
    [bad] = failed
    [ring] = [r for r in first if bad in r["hosts"]]
    assert ring["verdict"] == "retest" and network[bad]["verdict"] == "retest", (ring, network[bad])
    assert {h for h, c in network.items() if c["verdict"] != "pass"} <= set(ring["hosts"]), network
    print("  the slow ring was marked retest, not failed: nothing more to check")
    sys.exit(0)
assert failing == failed, "nodes failing network"
if not failed:
    # One round of rings, then only pairs of sound nodes.
    assert all(r["round"] == 1 or r["pair"] for r in result["ring_tests"]), result["ring_tests"]
    assert not [l for l in result["links"] if l["verdict"] == "fail"], "a link failed"
else:
    [bad] = failed
    assert "slow in its rings and" in network[bad]["value"], network[bad]
    # Every failed link is the bad node's, and put down to it.
    for link in result["links"]:
        if link["verdict"] == "fail":
            assert bad in link["hosts"] and link["cause"].startswith("node " + bad), link
    assert any(bad in l["hosts"] and l["verdict"] == "fail" for l in result["links"]), "no failed link of " + bad
    # Its ring neighbour, slow beside it, is cleared by it.
    [neighbour] = [h for r in first if bad in r["hosts"] for h in r["hosts"] if h != bad]
    assert network[neighbour]["verdict"] == "pass" and "slow beside " + bad + ", which fails" in network[neighbour]["value"], network[neighbour]
PY
  [ -z "$want_status" ] || [ "$status" -eq "$want_status" ] || grep -q "slow ring was marked retest" "$name.check" ||
    fail "$name: exit status $status, expected $want_status"
}

accept_groups healthy "" -
hosts slow host6 200mbit
accept_groups slow-host6 1 host6
hosts heal host6
echo "accept group testing on test hosts ok"
