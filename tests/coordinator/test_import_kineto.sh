#!/usr/bin/env bash
# `rankscope import-kineto` end to end:
# - the real torch.profiler traces in shared/data/kineto, and a synthetic job
#   stamped in epoch µs: `report --hta-compat` gives HTA's own figures (that
#   folder's README; HTA 0.5.0 run on the synthetic job) to the 0.01
#   percentage point and the µs;
# - one rank of two: the report says which figures cannot be measured (n/a in
#   text, null beside a reason in JSON), lists the missing rank as missing,
#   and info names the rank whose clock the timeline is on;
# - a synthetic 4-rank job with known clock offsets: each offset is found
#   within the bound `rankscope info` states;
# - five small traces of what real torch.profiler traces hold: a GPU-side
#   ProfilerStep (ROCm), a device-wide synchronisation, MTIA's categories and
#   an unknown one, launches without a kernel, the profiler's own markers;
# - damaged traces (cut gzip, invalid JSON, negative and absurd durations,
#   ids beyond INT64_MAX, missing fields): the sound events are imported, each
#   problem is named with its file and event index, and info counts them;
# - traces that cannot be imported (no rank, two files of one rank, not JSON,
#   JSON without traceEvents, no event at all) stop with a message naming the
#   file;
# - two processes under mpiexec import the same job as one does;
# - HTA's figures of a rank do not move with its clock offset;
# - gzip padding and several gzip members are not damage;
# - --comm-kernel makes kernels communication (a bad pattern is refused, one
#   that matches no kernel is warned about);
# - the imported timeline exports to Perfetto that the independent checker passes.
# Usage: test_import_kineto.sh RANKSCOPE PYTHON KINETO_DATA GENERATOR MPIEXEC [CHECK_PERFETTO]
set -euo pipefail
rankscope=$1 python=$2 data=$3 generator=$4 mpiexec=$5 check_perfetto=${6:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -d "$data" ] || fail "the Kineto traces are not at $data"

# ------------------------------------------------------- parity with HTA ---
# HTA's figures on a folder of traces: rank idle% compute% non-compute%
# kernel_time_us overlap%, equal to HTA's 2-decimal percentages and whole µs.
expect() {
  local folder=$1 set
  set=$(basename "$folder")
  shift
  "$rankscope" import-kineto "$folder" -o "$work/$set.h5" >"$work/$set.import" 2>&1 ||
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
        if abs(got[key] - float(want)) > 0.001:
            sys.exit(f"{name} rank {rank}: {key} {got[key]} differs from HTA's {want}")
    if got["kernel_time_ns"] != int(kernel_us) * 1000:
        sys.exit(f"{name} rank {rank}: kernel time {got['kernel_time_ns'] / 1000} µs, HTA says {kernel_us}")
    print(f"{name} rank {rank}: {got}")
EOF
}
# HTA 0.6.1 on the real traces (shared/data/kineto/README.md).
expect "$data/trace_filter" 0:53.56:17.71:28.74:600058:11.81 1:54.72:22.57:22.72:600674:20.05
expect "$data/nccl_parser_config" 0:77.78:17.26:4.97:435586:14.31
expect "$data/df_index_resolver" 1:46.08:35.55:18.37:1396669:0.0
# The critical path of the real pair of traces: on aligned clocks, each
# walked step's path covers the step (from the last rank's end back to the
# begin of the rank it ends on: within a step's span), and its shares add
# up. Each drawn step is replayed (GPU streams, launches and NCCL's
# kernels): unchanged, in the time it took; the host never waits for the
# GPU in these steps, so no change to kernels or transfers shortens them.
"$python" - "$work/trace_filter.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
path = report["critical_path"]
assert path is not None, report.get("critical_path_reason")
assert [s["which"] for s in path["steps"]] == ["median", "slowest"], path["steps"]
for step in path["steps"]:
    span = step["end_ns"] - step["begin_ns"]
    assert 0.9 * span <= step["path_ns"] <= span, step
    assert sum(s["end_ns"] - s["begin_ns"] for s in step["segments"]) == step["path_ns"], step["step"]
shares = sum(r["share_pct"] for r in path["ranks"])
assert abs(shares - 100) < 1e-6, shares
assert path["items"] and all(i["ns"] > 0 for i in path["items"]), path["items"]
assert path["what_if_reason"] is None, path["what_if_reason"]
assert sorted({w["step"] for w in path["what_if"]}) == sorted(s["step"] for s in path["steps"]), path["what_if"]
for w in path["what_if"]:
    assert w["replayed_ns"] == w["recorded_ns"], w
    assert w["predicted_ns"] == w["recorded_ns"], w
print("trace_filter: critical path of steps", [s["step"] for s in path["steps"]], "over ranks",
      [(r["rank"], round(r["share_pct"], 1)) for r in path["ranks"]])
EOF
# Drawn in Perfetto (export --critical-path), the path's stretches are half
# this export's bytes: the size estimated before writing counts them (0.51
# of the bytes written when it did not, 0.78 since).
"$rankscope" export "$work/trace_filter.h5" --perfetto "$work/path.pftrace" --critical-path >"$work/path.out" 2>&1 ||
  { cat "$work/path.out"; exit 1; }
"$python" - "$work/path.out" <<'EOF'
import re, sys
out = open(sys.argv[1]).read()
written, estimated = map(int, re.search(r"(\d+) bytes \(.*estimated (\d+)\)", out).groups())
assert 0.7 <= estimated / written <= 1.4, f"estimated {estimated} bytes, wrote {written}"
print(f"trace_filter: the critical path in Perfetto: {written} bytes written, {estimated} estimated")
EOF
# HTA's idle breakdown per stream, kernel-type breakdown and launch
# statistics on the same traces, exact to the µs and the event
# (bench/hta_reference_figures.json: HTA 0.5.0, which reproduces every
# figure of that README).
"$python" - "$(dirname "$generator")/hta_reference_figures.json" "$work" <<'PY'
import json, sys
reference, work = json.load(open(sys.argv[1]))["folders"], sys.argv[2]
for folder, figures in reference.items():
    report = json.load(open(f"{work}/{folder}.json"))
    rows = {r["rank"]: r["hta"] for r in report["overlap"] if r.get("hta")}
    for rank, want in figures["ranks"].items():
        got = rows[int(rank)]
        idle = {i["stream"]: [i["host_wait_ns"], i["kernel_wait_ns"], i["other_ns"]] for i in got["idle_breakdown"]}
        want_idle = {i["stream"]: [1000 * i["host_wait_us"], 1000 * i["kernel_wait_us"], 1000 * i["other_us"]]
                     for i in want["idle_breakdown"]}
        if idle != want_idle:
            sys.exit(f"{folder} rank {rank}: idle breakdown {idle}, HTA's {want_idle}")
        types = {t["kernel_type"]: t["sum_ns"] for t in got["kernel_breakdown"]}
        want_types = {k: 1000 * v for k, v in want["kernel_type_sums"].items() if v}
        if types != want_types:
            sys.exit(f"{folder} rank {rank}: kernel breakdown {types}, HTA's {want_types}")
        for key, value in got["launch_stats"].items():
            if value != want["launch_stats"][key]:
                sys.exit(f"{folder} rank {rank}: launch stats {key} {value}, HTA's {want['launch_stats'][key]}")
        print(f"{folder} rank {rank}: HTA's idle, kernel and launch breakdowns exactly")
PY
# Timestamps in epoch µs (about 1.7e15), which HTA reads as float64 that
# step by 0.25 µs: HTA 0.5.0 (bench/hta_measure.py) on these files. Rounding
# the exact ns instead gives overlaps 0.23 and 0.24 pp lower.
"$python" "$generator" "$work/epoch_us" --ranks 2 --events-per-rank 6000 --edge-cases --epoch-us \
  --manifest "$work/epoch_us.manifest.json" >/dev/null
expect "$work/epoch_us" 0:13.29:80.19:6.52:67531:64.38 1:14.08:73.73:12.2:67525:65.32

# The two ranks of trace_filter share all-to-all kernels but no Seq: they
# are matched by time, and rank 1's clock gets an offset and a bound.
grep -Eq '^1 +[0-9]+ +0 +-?[0-9]+ +[0-9]+ +[1-9]' "$work/trace_filter.import" ||
  { cat "$work/trace_filter.import" >&2; fail "trace_filter: rank 1 was not aligned to rank 0"; }
"$rankscope" info "$work/trace_filter.h5" >"$work/trace_filter.info"
[ "$(grep -c ' missing ' "$work/trace_filter.info")" -eq 126 ] || fail "trace_filter: 126 of 128 ranks should show as missing"
"$rankscope" report "$work/trace_filter.h5" >"$work/trace_filter.report"
grep -q "(126 ranks missing: no data)" "$work/trace_filter.report" ||
  { cat "$work/trace_filter.report" >&2; fail "trace_filter: the report should count the missing ranks once"; }

# ------------------------------------------- what one rank cannot measure ---
# df_index_resolver is rank 1 of 2: nothing to compare it with, no wait to
# tell from transfer, and rank 0 is missing.
"$rankscope" report "$work/df_index_resolver.h5" --hta-compat >"$work/alone.report"
for line in "one rank with data: no clocks to align" \
  "stragglers: n/a: only rank 1 has data: there is no other rank to compare it with" \
  "wait        n/a, transfer        n/a" \
  "wait and transfer n/a (rank 1): no other rank has data" \
  "the HTA lines use HTA's"; do
  grep -qF "$line" "$work/alone.report" || { cat "$work/alone.report" >&2; fail "one rank: the report lacks \"$line\""; }
done
grep -q "none found\|clocks aligned" "$work/alone.report" && { cat "$work/alone.report" >&2; fail "one rank: claims a comparison"; }
"$python" - "$work/df_index_resolver.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
assert report["stragglers"] is None and "no other rank" in report["stragglers_reason"], report["stragglers_reason"]
missing, present = report["overlap"]
assert missing["rank"] == 0 and missing["status"] == "missing", missing
for key in ("comm_comp_overlap_pct", "compute_ns", "exposed_wait_ns", "idle_pct"):
    assert missing[key] is None and missing[key + "_reason"].startswith("missing"), (key, missing)
assert present["status"] == "complete" and present["exposed_comm_ns"] > 0, present
for key in ("exposed_wait_ns", "exposed_transfer_ns"):
    assert present[key] is None and present[key + "_reason"] == "no other rank has data", (key, present)
ranks = {r["rank"]: r for r in report["ranks"]}
assert ranks[0]["scores"] is None and ranks[0]["scores_reason"].startswith("missing"), ranks[0]
scores = ranks[1]["scores"]
assert scores["last_arriver_rate"] is None and scores["compute_score_relative"] is None, scores
assert all(s["exposed_wait_ns"] is None for s in ranks[1]["steps"]), ranks[1]["steps"][0]
clock = report["clock"]
assert clock["reference_rank"] == 1, clock
assert clock["ranks"][0]["status"] == "missing" and clock["ranks"][0]["offset_ns"] is None, clock["ranks"][0]
print("one rank of two: n/a where nothing can be compared, rank 0 missing")
EOF
# With --hta-compat, rankscope's own overlap stays beside HTA's: each by its own definition.
"$python" - "$work/trace_filter.json" <<'EOF'
import json, sys
rank0 = json.load(open(sys.argv[1]))["overlap"][0]
assert rank0["comm_comp_overlap_pct"] != rank0["hta"]["comm_comp_overlap_pct"], rank0
EOF
# nccl_parser_config is rank 0 of 2: its collectives have no other rank to skew or wait against.
"$python" - "$work/nccl_parser_config.json" <<'EOF'
import json, sys
for group in json.load(open(sys.argv[1]))["collectives_summary"]["groups"]:
    assert group["ranks"] == 1 and group["median_transfer_ns"] > 0, group
    for key in ("median_skew_ns", "max_skew_ns", "median_wait_ns"):
        assert group[key] is None and group[key + "_reason"] == "its instances were matched with no other rank", group
EOF
"$rankscope" info "$work/df_index_resolver.h5" | grep -q "clock: every rank on rank 1's clock" ||
  fail "one rank: info does not name rank 1's clock"

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
# On one clock the collectives' arrivals are compared: skews and waits
# measured, and small beside rank 1's 2.5 s offset, which was taken out.
groups = job["collectives_summary"]["groups"]
assert groups and all(g["ranks"] == 4 for g in groups), groups
for g in groups:
    assert not any(key.endswith("_reason") for key in g), g
    assert 0 < g["median_skew_ns"] <= g["max_skew_ns"] < 50_000_000, g
    assert 0 < g["median_wait_ns"] <= g["max_skew_ns"] and g["median_transfer_ns"] > 0, g
EOF
# Every report works on an imported timeline, and so does the export.
"$rankscope" report "$work/job.h5" >"$work/job.report" || fail "report on an imported job failed"
grep -q "allreduce\|AllReduce\|all_reduce" "$work/job.report" || { cat "$work/job.report" >&2; fail "the report lists no collectives"; }
if [ -n "$check_perfetto" ]; then
  "$rankscope" export "$work/job.h5" --perfetto "$work/job.pftrace" >/dev/null
  "$python" "$check_perfetto" "$work/job.pftrace" >"$work/job.check" ||
    { cat "$work/job.check" >&2; fail "the imported job's Perfetto export does not pass check_perfetto.py"; }
fi

# --------------------------------------- what real traces hold, small ---
# One small trace for each of five things real torch.profiler traces hold
# that were once misread; each is imported alone and checked where the user
# sees it: the report, HTA's figures, info's counters, the import's warnings.
mkdir "$work/held"
"$python" - "$work/held" <<'EOF'
import json, sys
folder = sys.argv[1]
def trace(name, events):
    json.dump({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events},
              open(f"{folder}/{name}_rank-0.json", "w"))
def x(cat, name, ts, dur, pid=10, tid=10, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
# ROCm: the step's GPU-side range (540 µs) besides the host's (9.3 ms).
trace("gpu_step", [x("user_annotation", "ProfilerStep#1", 1000, 9300),
                   x("cuda_runtime", "hipLaunchKernel", 1200, 10, correlation=1),
                   x("kernel", "Cijk_gemm", 1300, 500, pid=2, tid=0, device=2, stream=0, correlation=1),
                   x("gpu_user_annotation", "ProfilerStep#1", 1300, 540, pid=2, tid=0, device=2)])
# A device-wide synchronisation ending after the last kernel.
trace("device_sync", [x("kernel", "sgemm", 100, 10, pid=0, tid=7, device=0, stream=7, correlation=1),
                      x("kernel", "relu", 130, 20, pid=0, tid=7, device=0, stream=7, correlation=2),
                      x("cuda_sync", "Device Synchronize", 140, 60, pid=0, tid=-1, device=0, stream=-1)])
# MTIA: its device idle 42 % of the 100 µs from its first kernel to its last.
submit = "runFunction - job_prep_and_submit_for_execution"
trace("mtia", [x("cpu_op", "aten::mm", 90, 120),
               x("mtia_runtime", submit, 95, 4, correlation=1), x("mtia_runtime", submit, 150, 4, correlation=2),
               x("mtia_ccp_events", "gemm_kernel", 100, 30, pid=1, tid=3, device=1, stream=3, correlation=1),
               x("mtia_ccp_events", "relu_kernel", 172, 28, pid=1, tid=3, device=1, stream=3, correlation=2),
               x("mtia_insight", "insight", 100, 100, pid=1, tid=3), x("mtia_insight", "insight", 110, 10, pid=1, tid=3)])
# 30 launches and not one kernel: the GPU's side was not recorded.
trace("no_kernels", [x("cuda_runtime", "cudaLaunchKernel", 1000 + 10 * i, 5, correlation=i + 1) for i in range(30)])
# No ProfilerStep: the profiler's markers 2 s beyond 1.64 ms of events.
trace("markers", [x("Trace", "PyTorch Profiler (0)", 0, 2120000, pid="Spans", tid="PyTorch Profiler"),
                  {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
                   "tid": "Trace PyTorch Profiler", "ts": 0},
                  x("cpu_op", "aten::mm", 30000, 1000), x("cpu_op", "aten::add", 31040, 600),
                  {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 2120000}])
EOF
for held in gpu_step device_sync mtia no_kernels markers; do
  "$rankscope" import-kineto "$work/held/${held}_rank-0.json" -o "$work/held/$held.h5" >"$work/held/$held.import" 2>&1 ||
    { cat "$work/held/$held.import" >&2; fail "$held: import failed"; }
  "$rankscope" report "$work/held/$held.h5" --hta-compat --format json -o "$work/held/$held.json" >/dev/null
  "$rankscope" info "$work/held/$held.h5" --json >"$work/held/$held.info.json"
done
grep -q 'mtia_rank-0.json: event 5 (byte [0-9]*): category "mtia_insight": not a kind of event rankscope knows' \
  "$work/held/mtia.import" && [ "$(grep -c mtia_insight "$work/held/mtia.import")" -eq 1 ] ||
  { cat "$work/held/mtia.import" >&2; fail "mtia: the unknown category is not named once"; }
grep -qF "held/no_kernels_rank-0.json: 30 kernel launches (cudaLaunchKernel and the like) but not one kernel" \
  "$work/held/no_kernels.import" || { cat "$work/held/no_kernels.import" >&2; fail "no kernels: no warning"; }
"$python" - "$work/held" <<'EOF'
import json, sys
folder = sys.argv[1]
def load(name):
    return json.load(open(f"{folder}/{name}.json")), json.load(open(f"{folder}/{name}.info.json"))
report, _ = load("gpu_step")
steps = report["ranks"][0]["steps"]
assert [s["duration_ns"] for s in steps] == [9_300_000], f"gpu_step: the step is not the host's 9.3 ms: {steps}"
report, _ = load("device_sync")
hta = report["overlap"][0]["hta"]
assert hta["kernel_time_ns"] == 50_000, f"device_sync: HTA's kernel time counts the synchronisation: {hta}"
report, info = load("mtia")
hta = report["overlap"][0]["hta"]
assert (hta["idle_pct"], hta["compute_pct"]) == (42, 58), f"mtia: {hta}"
kinds = info["events_by_kind"]
assert kinds.get("gpu_kernel") == 2 and kinds.get("cuda_api") == 2, f"mtia: {kinds}"
assert info["ranks"][0]["counters"]["kineto_events_category_unknown"] == 2, info["ranks"][0]["counters"]
_, info = load("no_kernels")
assert info["ranks"][0]["counters"]["kineto_kernels_missing"] == 30, info["ranks"][0]["counters"]
report, _ = load("markers")
assert report["steps"]["mean_step_ns"] == 1_640_000, f"markers: the step is not the events' span: {report['steps']}"
print("held: the host's step, HTA without the device-wide sync, MTIA's kinds, missing kernels, the markers")
EOF

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
  [ ! -e "$work/refused.h5.import" ] || fail "$why: the shards were left behind"
}
"$python" -c 'import json, sys; t = json.load(open(sys.argv[1])); del t["distributedInfo"]; json.dump(t, open(sys.argv[2], "w"))' \
  "$work/job/rank-3.json" "$work/trace.json"
refused "no rank" "trace.json: no rank: the trace has no distributedInfo.rank" "$work/trace.json"
cp "$work/job/rank-0.json" "$work/copy_rank-0.json"
refused "one rank twice" "rank-0.json and .*copy_rank-0.json are both rank 0" "$work/job/rank-0.json" "$work/copy_rank-0.json"
echo "not json" >"$work/junk_rank-5.json"
refused "not JSON" "junk_rank-5.json is not a JSON object" "$work/junk_rank-5.json"
# JSON of another kind, or a trace with no event, is no rank that captured nothing.
echo '{"schema": "1.0.1", "pid": 7, "nodes": []}' >"$work/et_rank-1.json"
refused "an execution trace" "et_rank-1.json: not a torch.profiler trace: it has no traceEvents array" "$work/et_rank-1.json"
echo '{"traceEvents": []}' >"$work/empty_rank-1.json"
refused "no event" "empty_rank-1.json: its traceEvents array is empty" "$work/empty_rank-1.json"
echo '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}' >"$work/unknown_rank-1.json"
refused "no event imported" "no trace holds an event rankscope imports, so there is nothing to import; .*unknown_rank-1.json: event 0" \
  "$work/unknown_rank-1.json"
refused "a bad pattern" '--comm-kernel: "(" is not a regular expression' --comm-kernel "(" "$work/job/rank-0.json"
# A kernel the trace does not call communication becomes so by --comm-kernel
# (repeatable, traces after it): the GEMMs of rank 0, here. A pattern that
# matches no kernel is named in a warning.
"$rankscope" import-kineto --comm-kernel "^void at::" --comm-kernel "gemm" --comm-kernel "^deep_ep::" \
  "$work/job/rank-0.json" -o "$work/comm.h5" >/dev/null 2>"$work/comm.err" || fail "--comm-kernel: import failed"
grep -qF 'warning: --comm-kernel "^deep_ep::" matches no kernel name in the traces' "$work/comm.err" ||
  { cat "$work/comm.err" >&2; fail "--comm-kernel: the pattern that matches nothing is not named"; }
[ "$(grep -c -- "--comm-kernel" "$work/comm.err")" -eq 1 ] || { cat "$work/comm.err" >&2; fail "--comm-kernel: warned about a pattern that matches"; }
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

# Sizes from distributedInfo are checked before anything is sized by them.
edit_info() {  # edit_info TRACE OUT PYTHON-STATEMENT-ON-t
  "$python" -c "import json, sys; t = json.load(open(sys.argv[1])); $3; json.dump(t, open(sys.argv[2], 'w'))" "$1" "$2"
}
edit_info "$work/job/rank-1.json" "$work/huge_rank-1.json" 't["distributedInfo"]["world_size"] = 2000000000'
refused "a huge world size" "huge_rank-1.json: distributedInfo.world_size 2000000000 is beyond the largest job" \
  "$work/huge_rank-1.json"
edit_info "$work/job/rank-1.json" "$work/far_rank-1.json" 't["distributedInfo"]["rank"] = 2000000000'
refused "a huge rank" "far_rank-1.json: rank 2000000000 is beyond the largest job" "$work/far_rank-1.json"
edit_info "$work/job/rank-1.json" "$work/outside_rank-1.json" 't["distributedInfo"]["rank"] = 4'
refused "a rank outside its job" "outside_rank-1.json: rank 4 is not in its job of 4 ranks" "$work/outside_rank-1.json"

# Traces of different jobs are refused, naming both and why; --same-job imports them with a warning.
"$python" "$generator" "$work/pair" --ranks 2 --events-per-rank 4000 --seed 9 >/dev/null
refused "two jobs' sizes" "rank-0.json and .*pair/rank-1.json are traces of different jobs: distributedInfo.world_size is 4 in the first and 2 in the second" \
  "$work/job/rank-0.json" "$work/pair/rank-1.json"
# The same job's rank 1, as if recorded 8.5 days later: its Seq numbers match rank 0's all the same.
edit_info "$work/job/rank-1.json" "$work/later_rank-1.json" 't["baseTimeNanoseconds"] += 734400 * 10**9'
refused "traces days apart" "rank-0.json and .*later_rank-1.json are traces of different jobs: the first was recorded from .* 204.0 hours later" \
  "$work/job/rank-0.json" "$work/later_rank-1.json"
"$rankscope" import-kineto --same-job "$work/job/rank-0.json" "$work/later_rank-1.json" -o "$work/later.h5" \
  >"$work/later.out" 2>&1 || { cat "$work/later.out" >&2; fail "--same-job: import failed"; }
grep -q "warning: --same-job: .*are traces of different jobs: the first was recorded" "$work/later.out" ||
  { cat "$work/later.out" >&2; fail "--same-job: no warning"; }
# Its clock cannot be put on rank 0's with any bound: it is not, and nothing says it is.
grep -q "later_rank-1.json: the clock of rank 1 is not aligned: against rank 0: its matches put its clock 7344[0-9]* s" \
  "$work/later.out" || { cat "$work/later.out" >&2; fail "--same-job: the doubtful clock is not named"; }
"$rankscope" info --json "$work/later.h5" >"$work/later.info.json"
"$python" - "$work/later.info.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
clock = {r["rank"]: r for r in info["clock"]["ranks"]}
assert not info["clock"]["corrected"] and not clock[1]["synced"], info["clock"]
counters = info["ranks"][1]["counters"]
assert counters["kineto_clock_unaligned"] == 1 and counters["kineto_clock_doubtful"] == 1, counters
print("--same-job: imported, rank 1 not aligned:", clock[1])
EOF
"$rankscope" report "$work/later.h5" >"$work/later.report"
head -1 "$work/later.report" | grep -q "clocks NOT aligned" || fail "--same-job: the report calls the clocks aligned"
if "$rankscope" import-kineto "$work/job" -o "$work/no/such/folder/job.h5" >"$work/refused.out" 2>&1; then
  fail "a timeline in a missing folder: imported"
fi
grep -q "cannot create .*/no/such/folder/job.h5.import-[A-Za-z0-9]\{6\}: No such file or directory" "$work/refused.out" ||
  { cat "$work/refused.out" >&2; fail "a timeline in a missing folder: no clear message"; }
[ ! -e "$work/no" ] || fail "folders were made for the timeline"
echo "import-kineto: all checks passed"
