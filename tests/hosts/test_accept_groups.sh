#!/usr/bin/env bash
# `rankscope accept --links groups` (group testing) on eight test hosts, one
# rank each. Healthy: one round of four rings of two, then pairs of sound
# nodes, and no node fails network nor any link. Not nine: a ring of three
# here is three processes spinning in MPI on two cores, and ran at 0.6-0.8
# of the rings of two (bench/results/acceptance.md). With host6's link slowed: its
# ring fails, bisection leaves host5 and host6, host6 fails network (slow with a node
# known sound too), host5 is cleared by it, no other node fails network,
# and the run fails. On these shared cores a pair now and then strays:
# host5's pair may be to be retested, and host5 with it. The pairs are
# judged against the reference pairs of sound nodes where those ran slower
# (round 2 once ran at 0.6 of round 1, under the load of other tests). Compute, memory and the reference job
# are accept's other checks (hosts.accept), and on eight hosts sharing two
# cores they are left unjudged here. The healthy run's timeline holds every
# ring's transfers, each send matched to its receive. The slow run is judged
# with a baseline of 100 nodes, whose rings were wider: its ring figure is
# set aside, and the network check's reference says so.
# Usage: test_accept_groups.sh RANKSCOPE
. "$(dirname "$0")/common.sh" 207
rankscope=$1
hosts up 8 --slots 1 >/dev/null

# Runs accept as NAME with group testing (and OPTIONS); checks its exit
# status when WANT_STATUS is given, that exactly FAILED (comma-separated, "-"
# for none) fail network, and prints the rings and links. Returns 1, saying
# why, where the run is not as expected.
accept_groups_once() {
  local name=$1 want_status=$2 failed=$3 status=0 started
  shift 3
  rm -f "$name.json" "$name.h5"
  started=$(date +%s)
  # The hosts share one machine's last-level cache: --memory-mb keeps the
  # triad from the STREAM rule's size for a cache of 260 MiB (3 GiB, eight times over).
  OMPI_MCA_mpi_yield_when_idle=1 \
    hosts mpirun -n 8 "$rankscope" accept --level quick --one-at-a-time --memory-mb 384 --links groups --format json -o "$name.json" \
    --timeline "$PWD/$name.h5" "$@" 2>"$name.log" || status=$?
  echo "$name: exit status $status in $(($(date +%s) - started)) s"
  [ -s "$name.json" ] || { cat "$name.log"; echo "$name: no JSON (exit status $status)"; return 1; }
  grep -q "links: group tests, round 1: 4 rings of 2, 2, 2, 2 nodes" "$name.log" ||
    { cat "$name.log"; echo "$name: no first round of 4 rings"; return 1; }
  /usr/bin/python3 - "$name.json" "$failed" <<'PY' || return 1
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
    print("  ", node["host"], check["verdict"], check["value"], "against", check["reference"])
first = [r for r in result["ring_tests"] if r["round"] == 1]
assert [r["hosts"] for r in first] == [["host1", "host2"], ["host3", "host4"], ["host5", "host6"], ["host7", "host8"]], first
assert all(g > 0 for r in first for g in r["node_gbps"]), first
assert {h for h, c in network.items() if c["verdict"] == "fail"} == failed, "nodes failing network"
if not failed:
    # One round of rings, then only pairs of sound nodes.
    assert all(r["round"] == 1 or r["pair"] for r in result["ring_tests"]), result["ring_tests"]
    assert not [l for l in result["links"] if l["verdict"] == "fail"], "a link failed"
else:
    [bad] = failed
    assert "slow in its rings and" in network[bad]["value"], network[bad]
    # The baseline's ring, of wider rings, judges nothing (were it to, every ring would fail at its 1000 GB/s).
    assert "not the baseline's, of 100 nodes in rings of " in network[bad]["reference"], network[bad]
    assert ", against rings of 2 here)" in network[bad]["reference"], network[bad]
    # Every failed link is the bad node's, and put down to it.
    for link in result["links"]:
        if link["verdict"] == "fail":
            assert bad in link["hosts"] and link["cause"].startswith("node " + bad), link
    assert any(bad in l["hosts"] and l["verdict"] == "fail" for l in result["links"]), "no failed link of " + bad
    # Its ring neighbour, slow beside it, is cleared by it, unless its own pair with a sound node strayed
    # into retest on these shared cores.
    [neighbour] = [h for r in first if bad in r["hosts"] for h in r["hosts"] if h != bad]
    check = network[neighbour]
    assert (check["verdict"] == "pass" and "slow beside " + bad + ", which fails" in check["value"]) or (
        check["verdict"] == "retest" and "and to be retested" in check["value"]), check
PY
  [ -z "$want_status" ] || [ "$status" -eq "$want_status" ] ||
    { echo "$name: exit status $status, expected $want_status"; return 1; }
}
accept_groups() { once_more_if_needed accept_groups_once "$@"; }

accept_groups healthy "" -
# Every ring's transfers are in the timeline, each send matched to its receive.
"$rankscope" info --check --json healthy.h5 >healthy-info.json || fail "info --check refused the timeline of the run"
/usr/bin/python3 - <<'PY'
import json
info = json.load(open("healthy-info.json"))
# Round 1 alone: 8 nodes, each a send and a receive in each of 9 repeats.
assert info["events_by_kind"]["mpi_p2p"] >= 8 * 2 * 9, info["events_by_kind"]
for rank in info["ranks"]:
    for counter in ("clock_violations_p2p", "p2p_unmatched"):
        assert rank["counters"][counter] == 0, (rank["rank"], counter, rank["counters"][counter])
print("  timeline:", info["events_by_kind"]["mpi_p2p"], "messages, all matched")
PY
printf 'rankscope-accept-baseline 1\nlevel quick\nnodes 100\nring_gbps 1000\n' >wide.baseline
hosts slow host6 200mbit
accept_groups slow-host6 1 host6 --baseline "$PWD/wide.baseline"
hosts heal host6
echo "accept group testing on test hosts ok"
