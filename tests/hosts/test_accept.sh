#!/usr/bin/env bash
# `rankscope accept --level quick` on four test hosts, one rank each: healthy
# hosts pass with nothing failed (twice, the second time with a spare rank on
# one host, which waits: no false alarm); one host's CPU
# throttled fails that host on compute (its memory figure may go too: the
# triad runs on that CPU) and no other host, nor does the reference job
# fail another (it names the throttled host only where the machine's cores
# are not busier than the throttle: docs/accept-reference.md); one host's sending
# slowed (one way only)
# fails that host on network and exactly its links; a host lost mid-run
# fails, and the rest are judged on what was measured. Every node's clock
# passes. The healthy run's timeline (--timeline) passes `info --check`,
# with every link's transfers as messages matched and no causality
# violation, and `report` shows the reference job's steps. Every run
# reports every collective over all four hosts and over the two groups of
# two, and fails none of them (two groups are not judged against their
# peers). How long each run takes is measured in bench/results/acceptance.md
# ("Acceptance"), not judged here: under sanitizers a run takes minutes.
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
# within the fleet's noise (bench/results/acceptance.md), and retest is the verdict for
# that; only a failure is a false alarm. Returns 1, saying why, where the run
# is not as expected.
accept_once() {
  local name=$1 want_status=$2 failed_hosts=$3 check=$4 links=$5 status=0 started
  rm -f "$name.h5" "$name.json"
  started=$(date +%s)
  # The four hosts share two cores, and full-scale collectives run on all
  # four at once. Ranks that spin while they wait take the cores of the
  # ranks they wait for (8-32 ms for 8 B), and a host throttled to 25 % of a
  # core spends its quota spinning: the throttled run took over 3 minutes.
  # Yielding ranks take 0.1-0.3 ms. They share one last-level cache too: on
  # a machine that reports 260 MiB of it, the STREAM rule's triad is 3 GiB a
  # host, 100 s of a quick run; --memory-mb keeps it at the size of the rest.
  OMPI_MCA_mpi_yield_when_idle=1 \
    hosts mpirun -n $((4 + ${SPARE_RANKS:-0})) --oversubscribe "$rankscope" accept --level quick --one-at-a-time --memory-mb 384 \
    --format json --timeline "$PWD/$name.h5" >"$name.json" 2>"$name.log" || status=$?
  echo "$name: exit status $status in $(($(date +%s) - started)) s"
  [ -s "$name.json" ] || { cat "$name.log"; echo "$name: no JSON (exit status $status)"; return 1; }
  # The figures first: where the verdict is not the one expected, they say why.
  /usr/bin/python3 - "$name.json" "$failed_hosts" "$check" "$links" <<'PY' || return 1
import json, sys
result = json.load(open(sys.argv[1]))
failed_hosts = set() if sys.argv[2] == "-" else set(sys.argv[2].split(","))
check, links = sys.argv[3], sys.argv[4]
for node in result["nodes"]:
    figures = {c["name"]: (c["verdict"], c["value"], round(c["ratio"], 2)) for c in node["checks"] if not c["name"].startswith("inventory")}
    print(" ", node["host"], node["verdict"], figures)
    assert figures["clock"][0] == "pass", (node["host"], figures["clock"])
print("  reference job:", {k: v for k, v in result["reference_job"].items() if k != "straggler"},
      "straggler:", result["reference_job"]["straggler"] if result["reference_job"]["straggler"] == "none" else
      (result["reference_job"]["straggler"]["host"], result["reference_job"]["straggler"]["cause"]))
assert result["reference_job"]["steps"] == 12, result["reference_job"]
for link in result["links"]:
    print(" ", "-".join(link["hosts"]), link["verdict"], round(link["bandwidth_gbps"], 3), "GB/s", round(link["latency_us"], 1), "us", link["cause"])
assert result["verdict"] == ("fail" if failed_hosts else "pass"), result["verdict"]
assert {n["host"] for n in result["nodes"]} == {"host1", "host2", "host3", "host4"}
assert {n["host"] for n in result["nodes"] if n["verdict"] == "fail"} == failed_hosts, "nodes failed"
# The check named must fail. A throttled CPU may slow the node's memory
# figure too (the triad runs on it); a slowed link, nothing but the network.
# Either may hold back the reference job.
for node in result["nodes"]:
    if node["host"] in failed_hosts:
        failing = {c["name"] for c in node["checks"] if c["verdict"] == "fail"}
        assert check in failing and failing <= {check, "memory" if check == "compute" else check, "reference_job"}, (node["host"], failing)
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
# What the first pass (9 repeats) left unpassed was measured once more (3 repeats): the fault stays.
repeats = {n["host"]: (len(n["gemm_gflops"]), len(n["triad_gbps"])) for n in result["nodes"]}
assert all(r in ((9, 9), (12, 9), (9, 12), (12, 12)) for r in repeats.values()), repeats
for node in result["nodes"]:
    if node["host"] in failed_hosts and check == "compute":
        assert len(node["gemm_gflops"]) == 12, (node["host"], "not retested", node["gemm_gflops"])
for l in result["links"]:
    assert len(l["bandwidth_gbps_repeats"]) in (9, 12), l
    if l["verdict"] == "fail":
        assert len(l["bandwidth_gbps_repeats"]) == 12, ("a link failed without a retest", l)
link_host = links.split(":")[-1]
failed = {tuple(l["hosts"]) for l in result["links"] if l["verdict"] == "fail"}
its_links = {tuple(l["hosts"]) for l in result["links"] if link_host in l["hosts"]}
if links.startswith("exactly:"):
    assert failed == its_links, ("failed links", failed, "expected", its_links)
else:
    assert failed <= its_links, ("failed links", failed)
PY
  [ "$status" -eq "$want_status" ] || { echo "$name: exit status $status, expected $want_status"; return 1; }
}
# accept_once, and once more where the first run is not as expected (a
# healthy link at 0.73 of the median, in 1 of 2 healthy runs of one CI run).
accept() { once_more_if_needed accept_once "$@"; }

accept healthy 0 - - -
"$rankscope" info --check --json healthy.h5 >healthy-info.json || fail "info --check refused the timeline of the run"
"$rankscope" report --format json healthy.h5 >healthy-report.json || fail "report on the timeline of the run failed"
/usr/bin/python3 - <<'PY'
import json
info = json.load(open("healthy-info.json"))
assert info["world_size"] == 4 and {r["host"] for r in info["ranks"]} == {"host1", "host2", "host3", "host4"}
# Each repeat of each of the 6 links (9, and 3 more where retested): a transfer each way, recorded by
# its sender and its receiver.
result = json.load(open("healthy.json"))
repeats = sum(len(l["bandwidth_gbps_repeats"]) for l in result["links"])
assert info["events_by_kind"]["mpi_p2p"] == repeats * 4, (info["events_by_kind"], repeats)
for rank in info["ranks"]:
    counters = rank["counters"]
    for counter in ("clock_violations", "clock_violations_p2p", "p2p_unmatched"):
        assert counters[counter] == 0, (rank["rank"], counter, counters[counter])
report = json.load(open("healthy-report.json"))
assert all(len(rank["steps"]) == 12 for rank in report["ranks"]), [len(rank["steps"]) for rank in report["ranks"]]
print("  timeline:", info["events"], "events,", info["events_by_kind"])
PY
# With a spare rank on host1 (as a launch with a rank per GPU has seven on
# each node): it waits, host1 is measured once, and the verdict is the same.
SPARE_RANKS=1 accept healthy-again 0 - - -
grep -q "5 ranks on 4 nodes: the first rank of each node measures it, 1 other waits" healthy-again.log ||
  { cat healthy-again.log; fail "no word of the spare rank"; }
hosts throttle host2 25
accept throttled 1 host2 compute only:host2
hosts heal host2
# Only what host3 sends is slowed, as by a failing transmitter: every link
# is timed both ways, so all of host3's links fail, those where it sends
# second as well.
hosts slow-out host3 200mbit
accept slow-link 1 host3 network exactly:host3
hosts heal host3

# host4 lost while it measures its compute: mpirun ends the job, and rank 0
# gives the verdict on what was measured: host4 fails, having gone silent;
# the others are judged on the repeats they finished.
OMPI_MCA_mpi_yield_when_idle=1 hosts mpirun -n 4 "$rankscope" accept --level quick --one-at-a-time --memory-mb 384 --format json -o lost.json \
  2>lost.log &
job=$!
for _ in $(seq 600); do
  grep -q "compute: GEMM 1024^3, repeat 3 of" lost.log && break
  sleep 0.1
done
grep -q "compute: GEMM 1024^3, repeat 3 of" lost.log || { kill -9 $job; cat lost.log; fail "accept never reached its third compute repeat"; }
lost_at=$(date +%s)
hosts kill 4
timeout 60 tail --pid=$job -f /dev/null || { kill -9 $job; fail "the run was still going 60 s after host4 was lost"; }
status=0
wait $job || status=$?
echo "lost-host: exit status $status, $(($(date +%s) - lost_at)) s after host4 was lost"
[ "$status" -ne 0 ] || fail "a run that lost a node succeeded"
/usr/bin/python3 - lost.json <<'PY' || { cat lost.log; fail "lost host"; }
import json, sys
result = json.load(open(sys.argv[1]))
assert result["verdict"] == "fail", result["verdict"]
cut = result["cut_short"]
print("  cut short:", cut)
# Lost while in its third compute repeat, or a later one: rank 0 may start
# the next before the kill has taken host4 down.
stage = cut["stage"]
assert stage.startswith("compute: GEMM 1024^3, repeat ") and int(stage.split("repeat ")[1].split()[0]) >= 3, cut
# host4 is named. Now and then (1 of 9 trials, docs/accept.md) rank 0 hears
# no one in the last moments and names every node silent: a false
# 'answered' on a healthy host is allowed, nothing else.
assert "host4" in cut["silent_hosts"], cut
verdicts = {n["host"]: n for n in result["nodes"]}
assert set(verdicts) == {"host1", "host2", "host3", "host4"}, verdicts.keys()
answered = [c for c in verdicts["host4"]["checks"] if c["name"] == "answered"]
assert verdicts["host4"]["verdict"] == "fail" and answered and answered[0]["verdict"] == "fail", verdicts["host4"]
for host in ("host1", "host2", "host3"):
    node = verdicts[host]
    failing = {c["name"] for c in node["checks"] if c["verdict"] == "fail"}
    assert failing <= {"answered"}, (host, [c for c in node["checks"] if c["verdict"] == "fail"], node["gemm_gflops"])
    assert len(node["gemm_gflops"]) >= 2 and not node["triad_gbps"], (host, node["gemm_gflops"], node["triad_gbps"])
PY
echo "accept on test hosts ok"
