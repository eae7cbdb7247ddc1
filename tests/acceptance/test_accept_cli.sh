#!/usr/bin/env bash
# `rankscope accept` on this one machine: alone it measures its node and
# passes (no links, and no collectives, to measure), in text, JSON and HTML, with its clock
# check and the reference job; `--timeline` writes the run as a timeline
# that `info --check` accepts and `report` shows with the reference job's
# steps, and an existing one is refused; -o writes the summary to a file,
# replaced only with -f and only when it is an earlier summary of the same
# format, and a wrong -o stops it before it measures anything; under
# mpirun, which binds its rank to a core, it still measures on every CPU;
# with three ranks on the node the first measures and the others wait idle,
# all exiting with the verdict, and an error reaches every rank; a bad
# level is a usage error; a baseline saved, then judging the node by it and by a rule
# file; mistakes in those files named with their place, before anything is
# measured; --memory-mb sets the triad's size (the runs after the first use 384
# MiB, so that a machine with a large cache does not take minutes of each). The fleet's verdicts, and the timeline of several nodes (links,
# causality), are tested on test hosts (tests/hosts/test_accept.sh); the
# collectives over several ranks, by accept.collectives.np5.
# Usage: test_accept_cli.sh RANKSCOPE MPIEXEC
set -euo pipefail
rankscope=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== one node alone"
"$rankscope" accept --level quick --format json --timeline one.h5 >one.json 2>one.log || { cat one.log; fail "accept on one node failed"; }
grep -q "rankscope accept: 1 nodes: compute" one.log || { cat one.log; fail "no progress on stderr"; }
python3 - "$(hostname)" <<'PY'
import json, sys
result = json.load(open("one.json"))
assert result["verdict"] == "pass", result["verdict"]
assert result["links"] == [] and result["link_screen"] == "all_pairs" and result["ring_tests"] == [], result["links"]
assert result["collectives"] == [], result["collectives"]
[node] = result["nodes"]
assert node["host"] == sys.argv[1] and node["verdict"] == "pass", node
checks = {c["name"]: c for c in node["checks"]}
assert {"compute", "memory", "inventory.kernel", "inventory.mpi_library"} <= checks.keys(), checks.keys()
assert len(node["gemm_gflops"]) == 9 and min(node["gemm_gflops"]) > 0, node["gemm_gflops"]
assert len(node["triad_gbps"]) == 9 and min(node["triad_gbps"]) > 0, node["triad_gbps"]
assert checks["clock"]["verdict"] == "pass" and node["clock"] == {"offset_ns": 0, "bound_ns": 0, "error": ""}, node["clock"]
assert checks["reference_job"]["verdict"] == "pass", checks["reference_job"]
job = result["reference_job"]
assert job["steps"] == 12 and job["median_step_ms"] > 0 and job["step_cv"] >= 0, job
assert job["straggler"] is None and "only rank 0 has data" in job["straggler_reason"], job
inventory = node["inventory"]
gpu_checks = [name for name in checks if name.startswith(("gpu", "inventory.gpu"))]
if inventory["gpus"] == 0:  # no GPU here: said why, and no GPU check
    assert inventory["gpu_unavailable"].startswith("no GPU"), inventory
    assert node["gpus"] == [] and node["gpu_error"] == "" and not gpu_checks, (node["gpus"], gpu_checks)
else:
    assert len(node["gpus"]) == inventory["gpus"] and node["gpu_error"] == "", node
    assert all(len(g["gemm_tflops"]) == 9 and min(g["gemm_tflops"]) > 0 for g in node["gpus"]), node["gpus"]
    assert {"gpu0.compute", "gpu0.memory", "inventory.gpus"} <= set(gpu_checks), gpu_checks
print("one node:", checks["compute"]["value"], checks["memory"]["value"], checks["reference_job"]["value"],
      inventory["gpu_unavailable"] or f'{inventory["gpus"]} GPUs')
PY
"$rankscope" info --check one.h5 >info.txt || { cat info.txt; fail "info --check refused the timeline"; }
"$rankscope" report --format json one.h5 >report.json || fail "report on the timeline failed"
python3 - <<'PY'
import json
report = json.load(open("report.json"))
[rank] = report["ranks"]
assert len(rank["steps"]) == 12, len(rank["steps"])
PY
status=0
"$rankscope" accept --level quick --memory-mb 384 --timeline one.h5 >again.txt 2>again.log || status=$?
[ "$status" -eq 1 ] && grep -qF "one.h5 (--timeline) exists" again.log && [ ! -s again.txt ] || { cat again.log; fail "an existing timeline was not refused"; }
"$rankscope" accept --level quick --memory-mb 48 >one.txt 2>one-text.log || { cat one-text.log; fail "accept in text failed"; }
grep -q "memory: triad over 48 MiB (--memory-mb; the STREAM rule asks [0-9]* MiB, so caches may serve part of it)" one-text.log || { cat one-text.log; fail "--memory-mb did not set the triad's size"; }
head -1 one.txt | grep -q "^acceptance: PASS (1 of 1 nodes and 0 of 0 links accepted)" || { cat one.txt; fail "text summary"; }
grep -q "^reference job: 12 steps, median step .* ms, CV .*, straggler: n/a (only rank 0 has data" one.txt ||
  { cat one.txt; fail "no reference job in the text"; }

echo "== -o: the summary to a file"
"$rankscope" accept --level quick --memory-mb 384 --format html -o page.html >page.out 2>page.log ||
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
expect 1 "group testing needs 8 nodes or more (4 rings to judge each against), not 1: screen the links of fewer with --links pairs" \
  "$rankscope" accept --links groups
expect 2 "rankscope accept: --links" "$rankscope" accept --links some
"$rankscope" accept --level quick --memory-mb 384 --format html -o page.html -f 2>page.log ||
  { cat page.log; fail "accept -f over its own page failed"; }
grep -q "<title>rankscope acceptance: PASS" page.html || fail "page.html is not a new page"
"$rankscope" accept --level quick --memory-mb 384 -o one.txt -f 2>/dev/null || fail "accept -f over its own text summary failed"
head -1 one.txt | grep -q "^acceptance: PASS (1 of 1 nodes" || { cat one.txt; fail "text summary in one.txt"; }
# An -o that another program makes while accept measures (its .partial made at the start) is kept.
"$rankscope" accept --level quick --memory-mb 48 -o appeared.txt >appeared.out 2>appeared.log &
accepting=$!
for _ in $(seq 400); do [ -e appeared.txt.partial ] && break; sleep 0.05; done
[ -e appeared.txt.partial ] || fail "accept -o appeared.txt made no appeared.txt.partial"
echo theirs >appeared.txt
status=0; wait $accepting || status=$?
[ $status -ne 0 ] && grep -q "appeared.txt appeared while it was written, and is not replaced" appeared.log ||
  { cat appeared.log; fail "accept wrote over an -o that appeared meanwhile (status $status)"; }
[ "$(cat appeared.txt)" = theirs ] || fail "appeared.txt was written over"
[ -z "$(ls ./*.partial 2>/dev/null)" ] || fail "a .partial file was left behind: $(ls ./*.partial)"

echo "== under mpirun: every CPU of the node, and a rank per GPU"
# mpirun binds one or two ranks to a core each (here, as on any node): the
# node's compute and memory are still measured on every CPU it has.
"$mpiexec" -n 1 "$rankscope" accept --memory-mb 384 --format json >bound.json 2>bound.log || { cat bound.log; fail "accept under mpirun -n 1"; }
python3 - "$(nproc)" <<'PY'
import json, sys
[node] = json.load(open("bound.json"))["nodes"]
assert node["inventory"]["cpus"] == int(sys.argv[1]), (node["inventory"]["cpus"], "CPUs, not", sys.argv[1])
PY
# Launched with several ranks on a node, as jobs with a rank per GPU are:
# the first measures the node, the others wait idle, and every rank exits
# with the verdict.
cat >cpu_time.py <<'PY'
import resource, subprocess, sys
status = subprocess.call(sys.argv[1:])
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"rank CPU time {used.ru_utime} {used.ru_stime}", file=sys.stderr)
sys.exit(status)
PY
"$mpiexec" -n 3 python3 "$work/cpu_time.py" "$rankscope" accept --memory-mb 384 --format json >three.json 2>three.log ||
  { cat three.log; fail "three ranks on one node"; }
grep -q "rankscope accept: 3 ranks on 1 nodes: the first rank of each node measures it, 2 others wait" three.log ||
  { cat three.log; fail "no word of the ranks that wait"; }
python3 - "$(hostname)" <<'PY'
import json, re, sys
result = json.load(open("three.json"))
assert result["verdict"] == "pass" and [n["host"] for n in result["nodes"]] == [sys.argv[1]], result["nodes"]
seconds = sorted(float(u) + float(s) for u, s in re.findall(r"rank CPU time ([0-9.]+) ([0-9.]+)", open("three.log").read()))
assert len(seconds) == 3, seconds
# The two that wait take a few hundredths of a second (MPI's start), the one that measures seconds.
assert seconds[1] < 0.2 * seconds[2], seconds
PY
# An error on the ranks that measure reaches those that wait: all exit 1, and it is said once.
status=0
"$mpiexec" -n 2 "$rankscope" accept --links groups >two.txt 2>two.log || status=$?
[ "$status" -eq 1 ] || { cat two.log; fail "an error with two ranks on one node: exit status $status"; }
[ "$(grep -c "group testing needs 8 nodes or more" two.log)" -eq 1 ] || { cat two.log; fail "the error, said once"; }
[ ! -s two.txt ] || fail "a verdict was printed"

echo "== a bad level"
status=0
"$rankscope" accept --level slow >bad.txt 2>bad.log || status=$?
[ "$status" -eq 2 ] && grep -q "rankscope accept: --level" bad.log || { cat bad.log; fail "bad level: exit status $status"; }
status=0
"$rankscope" accept --memory-mb 0 >bad.txt 2>bad.log || status=$?
[ "$status" -eq 2 ] && grep -q "rankscope accept: --memory-mb" bad.log || { cat bad.log; fail "bad --memory-mb: exit status $status"; }
echo "== rules and baselines"
"$rankscope" accept --level quick --memory-mb 384 --save-baseline base.txt >/dev/null 2>save.log || { cat save.log; fail "saving a baseline"; }
grep -q "baseline base.txt written" save.log || { cat save.log; fail "no word of the baseline"; }
grep -q "^rankscope-accept-baseline 1$" base.txt && grep -q "^level quick$" base.txt && grep -q "^nodes 1$" base.txt &&
  grep -Eq "^compute_gflops [0-9.e+]+$" base.txt && grep -Eq "^memory_gbps [0-9.e+]+$" base.txt || { cat base.txt; fail "baseline"; }
status=0
"$rankscope" accept --level quick --memory-mb 384 --save-baseline base.txt >/dev/null 2>again.log || status=$?
[ "$status" -eq 1 ] && grep -q "error: base.txt (--save-baseline) exists and is a rankscope accept baseline: give --overwrite (-f)" again.log ||
  { cat again.log; fail "a baseline written over"; }
# This machine against its own baseline, with room for a shared machine's
# noise: a test beside this one on two cores halves what the quick level
# measures, and more (the baseline ten times above fails below, by 5 %).
printf 'compute_gflops >= 0.1 baseline\nmemory_gbps >= 0.1 baseline  # noisy neighbours\n' >loose.rules
"$rankscope" accept --level quick --memory-mb 384 --baseline base.txt --rules loose.rules --format json >self.json 2>self.log ||
  { cat self.log self.json; fail "a node failed its own baseline"; }
python3 - <<'PY'
import json
[node] = json.load(open("self.json"))["nodes"]
rules = {c["name"]: c for c in node["checks"] if c["name"].startswith("rule ")}
assert set(rules) == {"rule compute_gflops", "rule memory_gbps"}, rules
assert all(c["verdict"] == "pass" and c["rule"].endswith("(loose.rules:%d)" % (i + 1)) for i, c in enumerate(rules.values())), rules
PY
# A baseline from a node ten times faster: this one fails on compute, by the baseline's default 5 % rule.
awk '$1 == "compute_gflops" { $2 = $2 * 10 } { print }' base.txt >fast.txt
status=0
"$rankscope" accept --level quick --memory-mb 384 --baseline fast.txt >fast.out 2>fast.log || status=$?
[ "$status" -eq 1 ] && head -1 fast.out | grep -q "^acceptance: FAIL" &&
  grep -q "fail rule compute_gflops: .* against .* (baseline fast.txt); compute_gflops >= 0.95 baseline (default)" fast.out ||
  { cat fast.out fast.log; fail "a node ten times below its baseline"; }
# Mistakes in the files are named, with the place, before anything is measured.
expect_error() {  # MESSAGE ARGS...
  local message=$1 status=0
  shift
  "$rankscope" accept "$@" >err.out 2>err.log || status=$?
  [ "$status" -eq 1 ] && grep -qF "rankscope accept: error: $message" err.log && ! grep -q "compute:" err.log ||
    { cat err.log; fail "expected '$message' (exit status $status)"; }
}
printf '# thresholds\ncompute_gflops => 3\n' >typo.rules
expect_error "typo.rules:2: a rule is METRIC >= VALUE or METRIC <= VALUE" --rules typo.rules
expect_error "loose.rules:1: 'compute_gflops >= 0.1 baseline' needs a baseline (--baseline FILE)" --level quick --rules loose.rules
expect_error "base.txt: a baseline of level quick cannot judge a run of level full" --baseline base.txt --level full
expect_error "cannot read the baseline absent.txt" --level quick --baseline absent.txt
mkfifo rules.fifo
expect_error "cannot read rules.fifo: it is a FIFO (named pipe), not a regular file" --level quick --rules rules.fifo
expect_error "cannot read /dev/null: it is a character device, not a regular file" --level quick --baseline /dev/null

echo "accept command ok"
