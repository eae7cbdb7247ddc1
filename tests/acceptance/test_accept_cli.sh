#!/usr/bin/env bash
# `rankscope accept` on this one machine: alone it measures its node and
# passes (no links, and no collectives, to measure), in text and JSON; two ranks on one node are
# refused with how to ask for one per node; a bad level is a usage error.
# The fleet's verdicts are tested on test hosts (tests/hosts/test_accept.sh);
# the collectives over several ranks, by accept.collectives.np5.
# Usage: test_accept_cli.sh RANKSCOPE MPIEXEC
set -euo pipefail
rankscope=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== one node alone"
"$rankscope" accept --level quick --format json >one.json 2>one.log || { cat one.log; fail "accept on one node failed"; }
grep -q "rankscope accept: 1 nodes: compute" one.log || { cat one.log; fail "no progress on stderr"; }
python3 - "$(hostname)" <<'PY'
import json, sys
result = json.load(open("one.json"))
assert result["verdict"] == "pass", result["verdict"]
assert result["links"] == [], result["links"]
assert result["collectives"] == [], result["collectives"]
[node] = result["nodes"]
assert node["host"] == sys.argv[1] and node["verdict"] == "pass", node
checks = {c["name"]: c for c in node["checks"]}
assert {"compute", "memory", "inventory.kernel", "inventory.mpi_library"} <= checks.keys(), checks.keys()
assert len(node["gemm_gflops"]) == 9 and min(node["gemm_gflops"]) > 0, node["gemm_gflops"]
assert len(node["triad_gbps"]) == 9 and min(node["triad_gbps"]) > 0, node["triad_gbps"]
print("one node:", checks["compute"]["value"], checks["memory"]["value"])
PY
"$rankscope" accept --level quick >one.txt 2>/dev/null || fail "accept in text failed"
head -1 one.txt | grep -q "^acceptance: PASS (1 of 1 nodes and 0 of 0 links accepted)" || { cat one.txt; fail "text summary"; }

echo "== two ranks on one node"
status=0
"$mpiexec" -n 2 "$rankscope" accept >two.txt 2>two.log || status=$?
[ "$status" -eq 1 ] || fail "two ranks on one node: exit status $status"
grep -q "accept runs one rank per node, but a node has 2 (mpirun --map-by ppr:1:node, or --npernode 1)" two.log ||
  { cat two.log; fail "no message saying one rank per node"; }
[ ! -s two.txt ] || fail "a verdict was printed"

echo "== a bad level"
status=0
"$rankscope" accept --level slow >bad.txt 2>bad.log || status=$?
[ "$status" -eq 2 ] && grep -q "rankscope accept: --level" bad.log || { cat bad.log; fail "bad level: exit status $status"; }
echo "accept command ok"
