#!/usr/bin/env bash
# `rankscope accept` on this one machine: alone it measures its node and
# passes (no links to measure), in text, JSON and HTML; -o writes the summary
# to a file, replaced only with -f and only when it is an earlier summary of
# the same format, and a wrong -o stops it before it measures anything; two
# ranks on one node are refused with how to ask for one per node; a bad
# level is a usage error.
# The fleet's verdicts are tested on test hosts (tests/hosts/test_accept.sh).
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

echo "== -o: the summary to a file"
"$rankscope" accept --level quick --format html -o page.html >page.out 2>page.log ||
  { cat page.log; fail "accept --format html -o page.html failed"; }
[ ! -s page.out ] || fail "with -o, something was printed on stdout"
grep -q "rankscope accept: wrote page.html" page.log || { cat page.log; fail "no word of the file written"; }
python3 - "$(hostname)" <<'PY'
import html, sys
page = open("page.html", encoding="utf-8").read()
assert page.startswith("<!DOCTYPE html>\n"), page[:100]
assert "<title>rankscope acceptance: PASS, 1 nodes</title>" in page, page[:600]
for part in ('id="verdict">PASS', 'id="compute-bars"', 'id="memory-bars"', 'id="inventory-table"',
             "No links: one node has no link to measure.", "No collectives measured."):
    assert part in page, part
assert "<td>" + html.escape(sys.argv[1]) + "</td>" in page, "the host is not in the inventory"
PY
[ ! -e page.html.partial ] || fail "page.html.partial was left behind"
cp page.html page.kept

# expect STATUS TEXT COMMAND...: COMMAND exits with STATUS, saying TEXT on
# stderr, having measured nothing (no progress line).
expect() {
  local status=$1 text=$2
  shift 2
  local actual=0
  "$@" >out.txt 2>err.txt || actual=$?
  [ "$actual" -eq "$status" ] || { cat out.txt err.txt >&2; fail "$* exited $actual, not $status"; }
  grep -qF -- "$text" err.txt || { cat err.txt >&2; fail "$*: no message like: $text"; }
  ! grep -q "rankscope accept: 1 nodes:" err.txt || { cat err.txt >&2; fail "$*: measured before refusing"; }
}
expect 1 "page.html (-o) exists and is a rankscope accept HTML page: give --overwrite (-f) to replace it" \
  "$rankscope" accept --format html -o page.html
cmp -s page.html page.kept || fail "a refused run changed page.html"
expect 1 "page.html (-o) exists and is not a rankscope accept JSON summary" \
  "$rankscope" accept --format json -o page.html -f
echo "notes, not a summary" >notes.txt
cp notes.txt notes.kept
expect 1 "notes.txt (-o) exists and is not a rankscope accept text summary: it is not replaced" \
  "$rankscope" accept -o notes.txt -f
cmp -s notes.txt notes.kept || fail "notes.txt was changed"
expect 1 "cannot write no/such/folder/page.html.partial: No such file or directory" \
  "$rankscope" accept --format html -o no/such/folder/page.html
expect 2 "rankscope accept: --output: an empty path names no file" "$rankscope" accept -o ""
"$rankscope" accept --level quick --format html -o page.html -f 2>page.log ||
  { cat page.log; fail "accept -f over its own page failed"; }
grep -q "<title>rankscope acceptance: PASS" page.html || fail "page.html is not a new page"
"$rankscope" accept --level quick -o one.txt -f 2>/dev/null || fail "accept -f over its own text summary failed"
head -1 one.txt | grep -q "^acceptance: PASS (1 of 1 nodes" || { cat one.txt; fail "text summary in one.txt"; }
[ -z "$(ls ./*.partial 2>/dev/null)" ] || fail "a .partial file was left behind: $(ls ./*.partial)"

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
