#!/usr/bin/env bash
# `rankscope import-kineto` end to end:
# - the real torch.profiler traces in shared/data/kineto: `report --hta-compat`
#   gives HTA's own figures (that folder's README) within 0.5 percentage points;
# - a synthetic 4-rank job with known clock offsets: each offset is found
#   within the bound `rankscope info` states;
# - damaged traces (cut gzip, invalid JSON, negative and absurd durations,
#   ids beyond INT64_MAX, missing fields): the sound events are imported, each
#   problem is named with its file and event index, and info counts them;
# - traces that cannot be imported (no rank, two files of one rank, not JSON)
#   stop with a message naming the file;
# - two processes under mpiexec import the same job as one does;
# - HTA's figures of a rank do not move with its clock offset;
# - gzip padding and several gzip members are not damage;
# - --comm-kernel makes kernels communication (and a bad pattern is refused);
# - the imported timeline exports to Perfetto that the independent checker passes.
# Usage: test_import_kineto.sh RANKSCOPE PYTHON KINETO_DATA GENERATOR MPIEXEC [CHECK_PERFETTO]
set -euo pipefail
rankscope=$1 python=$2 data=$3 generator=$4 mpiexec=$5 check_perfetto=${6:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -d "$data" ] || fail "the Kineto traces are not at $data"

# ------------------------------------------------------- parity with HTA ---
# HTA 0.6.1's figures on these files (shared/data/kineto/README.md):
# rank idle% compute% non-compute% kernel_time_us overlap%
expect() {
  local set=$1
  shift
  "$rankscope" import-kineto "$data/$set" -o "$work/$set.h5" >"$work/$set.import" 2>&1 ||
    { cat "$work/$set.import" >&2; fail "$set: import failed"; }
  "$rankscope" report "$work/$set.h5" --hta-compat --format json -o "$work/$set.json" >/dev/null
  "$python" - "$work/$set.json" "$set" "$@" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
name = sys.argv[2]
rows = {r["rank"]: r["hta"] for r in report["overlap"] if r.get("hta")}
for spec in sys.argv[3:]:
    rank, idle, compute, non_compute, kernel_us, overlap = spec.split(":")
    got = rows[int(rank)]
    for key, want in (("idle_pct", idle), ("compute_pct", compute), ("non_compute_pct", non_compute),
                      ("comm_comp_overlap_pct", overlap)):
        value = got[key] if got[key] is not None else 0.0
        if abs(value - float(want)) > 0.5:
            sys.exit(f"{name} rank {rank}: {key} {value} differs from HTA's {want} by more than 0.5 pp")
    if abs(got["kernel_time_ns"] / 1000 - float(kernel_us)) > 1:
        sys.exit(f"{name} rank {rank}: kernel time {got['kernel_time_ns'] / 1000} µs, HTA says {kernel_us}")
    print(f"{name} rank {rank}: {got}")
EOF
}
expect trace_filter 0:53.56:17.71:28.74:600058:11.81 1:54.72:22.57:22.72:600674:20.05
expect nccl_parser_config 0:77.78:17.26:4.97:435586:14.31
expect df_index_resolver 1:46.08:35.55:18.37:1396669:0.0

# The two ranks of trace_filter share all-to-all kernels but no Seq: they
# are matched by time, and rank 1's clock gets an offset and a bound.
grep -Eq '^1 +[0-9]+ +0 +-?[0-9]+ +[0-9]+ +[1-9]' "$work/trace_filter.import" ||
  { cat "$work/trace_filter.import" >&2; fail "trace_filter: rank 1 was not aligned to rank 0"; }
"$rankscope" info "$work/trace_filter.h5" >"$work/trace_filter.info"
[ "$(grep -c ' missing ' "$work/trace_filter.info")" -eq 126 ] || fail "trace_filter: 126 of 128 ranks should show as missing"
"$rankscope" report "$work/trace_filter.h5" >"$work/trace_filter.report"
grep -q "(126 ranks missing: no data)" "$work/trace_filter.report" ||
  { cat "$work/trace_filter.report" >&2; fail "trace_filter: the report should count the missing ranks once"; }

# -------------------------------------------------- known clock offsets ---
"$python" "$generator" "$work/job" --ranks 4 --events-per-rank 4000 --clock-offset-us "0,2500000,-730.5,0.042" \
  --manifest "$work/job.manifest.json" >/dev/null
"$rankscope" import-kineto "$work/job" -o "$work/job.h5" >"$work/job.import" 2>&1 ||
  { cat "$work/job.import" >&2; fail "synthetic job: import failed"; }
"$rankscope" info "$work/job.h5" --json >"$work/job.info.json"
"$python" - "$work/job.info.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
truth = [0, 2_500_000_000, -730_500, 42]
assert info["clock"]["corrected"], "the imported clocks should count as corrected"
for row in info["clock"]["ranks"]:
    error = abs(row["offset_ns"] - truth[row["rank"]])
    if error > row["bound_ns"] or row["bound_ns"] > 1_000_000:
        sys.exit(f"rank {row['rank']}: offset {row['offset_ns']} ns, truth {truth[row['rank']]}, bound {row['bound_ns']}")
    print(f"rank {row['rank']}: offset error {error} ns within the bound of {row['bound_ns']} ns")
EOF
# Two processes share the traces and agree with one.
"$mpiexec" -n 2 "$rankscope" import-kineto "$work/job" -o "$work/job2.h5" >"$work/job2.import" 2>&1 ||
  { cat "$work/job2.import" >&2; fail "synthetic job: import by two processes failed"; }
"$rankscope" info "$work/job2.h5" --json >"$work/job2.info.json"
"$python" - "$work/job.info.json" "$work/job2.info.json" <<'EOF'
import json, sys
one, two = (json.load(open(path)) for path in sys.argv[1:3])
for key in ("events", "events_by_kind"):
    assert one[key] == two[key], (key, one[key], two[key])
assert one["clock"]["ranks"] == two["clock"]["ranks"], "the clock alignment differs between 1 and 2 processes"
print("two processes: same events and clocks as one")
EOF
# HTA's figures are a rank's own: they do not move with its clock offset
# (rank 2 is 730.5 µs off, a fraction of a µs included).
"$rankscope" import-kineto "$work/job/rank-2.json" -o "$work/alone.h5" >/dev/null 2>&1 || fail "rank 2 alone: import failed"
"$rankscope" report "$work/job.h5" --hta-compat --format json -o "$work/job.hta.json" >/dev/null
"$rankscope" report "$work/alone.h5" --hta-compat --format json -o "$work/alone.hta.json" >/dev/null
"$python" - "$work/job.hta.json" "$work/alone.hta.json" <<'EOF'
import json, sys
job, alone = (json.load(open(path)) for path in sys.argv[1:3])
in_job = next(r["hta"] for r in job["overlap"] if r["rank"] == 2)
by_itself = next(r["hta"] for r in alone["overlap"] if r["rank"] == 2)
assert in_job == by_itself, (in_job, by_itself)
print("HTA figures of rank 2 alike aligned and alone:", in_job)
EOF
# Every report works on an imported timeline, and so does the export.
"$rankscope" report "$work/job.h5" >"$work/job.report" || fail "report on an imported job failed"
grep -q "allreduce\|AllReduce\|all_reduce" "$work/job.report" || { cat "$work/job.report" >&2; fail "the report lists no collectives"; }
if [ -n "$check_perfetto" ]; then
  "$rankscope" export "$work/job.h5" --perfetto "$work/job.pftrace" >/dev/null
  "$python" "$check_perfetto" "$work/job.pftrace" >"$work/job.check" ||
    { cat "$work/job.check" >&2; fail "the imported job's Perfetto export does not pass check_perfetto.py"; }
fi

# ------------------------------------------------------------ bad input ---
mkdir "$work/bad"
"$python" - "$work/job/rank-1.json" "$work/bad/damaged_rank-1.json" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
head, events = text.split('"traceEvents": [', 1)
body, tail = events.rsplit("]", 1)
# One event on each line, as Kineto writes them: damage a few.
lines = body.split("\n")
def damage(index, old, new):
    assert old in lines[index], (index, old)
    lines[index] = lines[index].replace(old, new, 1)
xs = [i for i, l in enumerate(lines) if '"ph": "X"' in l and '"dur":' in l]
damage(xs[10], '"dur": ', '"dur": -')                       # negative duration
damage(xs[20], '"dur": ', '"dur": 7444512000000000 , "x": ')  # 236 years
damage(xs[30], '"ph": "X"', '"ph": "X" "oops": 1')          # invalid JSON
damage(xs[40], '"ts": ', '"ts_": ')                          # missing field
kernels = [i for i, l in enumerate(lines) if '"correlation": ' in l and '"cat": "kernel"' in l]
damage(kernels[5], '"correlation": ', '"correlation": 9223372036854775807')  # beyond INT64_MAX
open(sys.argv[2], "w").write(head + '"traceEvents": [' + "\n".join(lines) + "]" + tail)
print(xs[10], xs[20], xs[30], xs[40], kernels[5])
EOF
cp "$work/job/rank-0.json" "$work/bad/clean_rank-0.json"
# A gzip'd trace cut in the middle.
gzip -c "$work/job/rank-2.json" >"$work/full.gz"
head -c $(( $(stat -c %s "$work/full.gz") / 2 )) "$work/full.gz" >"$work/bad/cut_rank-2.json.gz"
"$rankscope" import-kineto "$work/bad" -o "$work/bad.h5" >"$work/bad.out" 2>"$work/bad.err" ||
  { cat "$work/bad.err" >&2; fail "damaged traces: the import should go on"; }
cat "$work/bad.err"
grep -q 'damaged_rank-1.json: event [0-9]* (byte [0-9]*): "dur" -[0-9.]* µs is negative; skipped' "$work/bad.err" ||
  fail "the negative duration is not named"
grep -q 'damaged_rank-1.json: event [0-9]* (byte [0-9]*): "dur" 7444512000000000 µs is absurd' "$work/bad.err" ||
  fail "the absurd duration is not named"
grep -q 'damaged_rank-1.json: event [0-9]* (byte [0-9]*): not valid JSON' "$work/bad.err" || fail "the invalid event is not named"
grep -q 'damaged_rank-1.json: event [0-9]* (byte [0-9]*): no "ts"' "$work/bad.err" || fail "the missing field is not named"
grep -q 'is not an id in 0..INT64_MAX' "$work/bad.err" || fail "the out-of-range id is not named"
grep -q 'cut_rank-2.json.gz: the file ends inside event [0-9]*.*the events before it are imported' "$work/bad.err" ||
  fail "the cut gzip file is not reported"
"$rankscope" info "$work/bad.h5" --json >"$work/bad.info.json"
"$python" - "$work/bad.info.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
ranks = {r["rank"]: r for r in info["ranks"]}
c1, c2 = ranks[1]["counters"], ranks[2]["counters"]
want = {"kineto_events_bad_times": 2, "kineto_events_malformed": 1, "kineto_events_missing_fields": 1,
        "kineto_ids_out_of_range": 1}
for name, count in want.items():
    if c1.get(name) != count:
        sys.exit(f"rank 1: {name} is {c1.get(name)}, expected {count}: {c1}")
if c2.get("kineto_file_truncated") != 1:
    sys.exit(f"rank 2: the cut trace is not counted: {c2}")
# What was sound is there: rank 1 lost its 4 bad events only, rank 2 its tail.
if not (ranks[0]["events"] - ranks[1]["events"] == 4 and 0 < ranks[2]["events"] < ranks[0]["events"]):
    sys.exit(f"events: {[ranks[r]['events'] for r in (0, 1, 2)]}")
print("damage counted:", {k: v for k, v in c1.items() if k.startswith("kineto")}, c2.get("kineto_file_truncated"))
EOF

# Not damage: padding after the last gzip member, and several members.
mkdir "$work/gz"
gzip -c "$work/job/rank-0.json" >"$work/gz/padded_rank-0.json.gz"
head -c 4096 /dev/zero >>"$work/gz/padded_rank-0.json.gz"
head -c 100000 "$work/job/rank-1.json" | gzip -c >"$work/gz/members_rank-1.json.gz"
tail -c +100001 "$work/job/rank-1.json" | gzip -c >>"$work/gz/members_rank-1.json.gz"
"$rankscope" import-kineto "$work/gz" -o "$work/gz.h5" >"$work/gz.out" 2>&1 || { cat "$work/gz.out" >&2; fail "gzip: import failed"; }
grep -q warning "$work/gz.out" && { cat "$work/gz.out" >&2; fail "gzip: padding or members reported as damage"; }
"$rankscope" info "$work/gz.h5" --json >"$work/gz.info.json"
"$python" - "$work/gz.info.json" "$work/job.info.json" <<'EOF'
import json, sys
gz, plain = (json.load(open(path)) for path in sys.argv[1:3])
events = {r["rank"]: r["events"] for r in plain["ranks"]}
for r in gz["ranks"]:
    if r["status"] == "missing":
        continue
    assert r["events"] == events[r["rank"]], (r["rank"], r["events"], events[r["rank"]])
    assert not r["counters"].get("kineto_file_truncated"), r["counters"]
print("gzip padding and members: every event, nothing counted as damage")
EOF

# ------------------------------------------------------------- refusals ---
refused() {
  local why=$1 pattern=$2
  shift 2
  if "$rankscope" import-kineto "$@" -o "$work/refused.h5" >"$work/refused.out" 2>&1; then fail "$why: imported"; fi
  grep -q -e "$pattern" "$work/refused.out" || { cat "$work/refused.out" >&2; fail "$why: no clear message"; }
  [ ! -e "$work/refused.h5" ] || fail "$why: a timeline was left behind"
}
"$python" -c 'import json, sys; t = json.load(open(sys.argv[1])); del t["distributedInfo"]; json.dump(t, open(sys.argv[2], "w"))' \
  "$work/job/rank-3.json" "$work/trace.json"
refused "no rank" "trace.json: no rank: the trace has no distributedInfo.rank" "$work/trace.json"
cp "$work/job/rank-0.json" "$work/copy_rank-0.json"
refused "one rank twice" "rank-0.json and .*copy_rank-0.json are both rank 0" "$work/job/rank-0.json" "$work/copy_rank-0.json"
echo "not json" >"$work/junk_rank-5.json"
refused "not JSON" "junk_rank-5.json is not a JSON object" "$work/junk_rank-5.json"
refused "a bad pattern" '--comm-kernel "(" is not a regular expression' --comm-kernel "(" "$work/job/rank-0.json"
# A kernel the trace does not call communication becomes so by --comm-kernel
# (repeatable, traces after it): the GEMMs of rank 0, here.
"$rankscope" import-kineto --comm-kernel "^void at::" --comm-kernel "gemm" "$work/job/rank-0.json" -o "$work/comm.h5" \
  >/dev/null 2>&1 || fail "--comm-kernel: import failed"
"$rankscope" info "$work/comm.h5" --json >"$work/comm.info.json"
"$python" - "$work/job.info.json" "$work/comm.info.json" <<'EOF'
import json, sys
job, comm = (json.load(open(path)) for path in sys.argv[1:3])
per_rank = job["events_by_kind"]["nccl_coll_gpu"] // 4
with_pattern = comm["events_by_kind"]["nccl_coll_gpu"]
assert with_pattern > per_rank, (with_pattern, per_rank)
assert comm["events"] * 4 == job["events"], "the pattern changes what kernels are, not how many"
print(f"--comm-kernel: {with_pattern} communication kernels instead of {per_rank}")
EOF
refused "no file" "nothere.json: cannot open" "$work/nothere.json"
if "$rankscope" import-kineto "$work/job" -o "$work/no/such/folder/job.h5" >"$work/refused.out" 2>&1; then
  fail "a timeline in a missing folder: imported"
fi
grep -q "cannot create .*/no/such/folder/job.h5.import-[A-Za-z0-9]\{6\}: No such file or directory" "$work/refused.out" ||
  { cat "$work/refused.out" >&2; fail "a timeline in a missing folder: no clear message"; }
[ ! -e "$work/no" ] || fail "folders were made for the timeline"
echo "import-kineto: all checks passed"
