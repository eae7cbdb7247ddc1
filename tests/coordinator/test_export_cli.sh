#!/usr/bin/env bash
# `rankscope export` end to end: the hand-made job (export_fixture.h) and a
# synthetic one, merged and exported in full and with each selection, to
# native Perfetto and to Chrome JSON. Every file goes through an independent
# checker (check_perfetto.py for Perfetto, check_chrome_json.py for JSON):
# zero errors, and the checker's counts of processes, tracks, slices,
# instants, counter samples and flows equal what the exporter says it wrote.
# With a DDP_SIM, also a real profile of it (mpiexec, 4 ranks) and its steps,
# and the critical path of a real pipeline (PIPELINE_STAGES, 4 stages).
# Usage: test_export_cli.sh RANKSCOPE MAKE_EXPORT_FIXTURE MAKE_SYNTHETIC_SHARDS PYTHON CHECK_PERFETTO CHECK_JSON
#                           [DDP_SIM MPIEXEC PIPELINE_STAGES]
set -euo pipefail
rankscope=$1 make_fixture=$2 make_shards=$3 python=$4 check_perfetto=$5 check_json=$6 ddp_sim=${7:-} mpiexec=${8:-} pipeline=${9:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f "$check_perfetto" ] || fail "the independent checker is not at $check_perfetto"

# export_and_check TIMELINE NAME [OPTIONS...]: exports both formats, checks each
# file and compares the checkers' counts with the exporter's; prints the
# exporter's output and leaves it in $work/NAME.out.
export_and_check() {
  local timeline=$1 name=$2
  shift 2
  "$rankscope" export "$timeline" --perfetto "$work/$name.pftrace" --chrome "$work/$name.json" "$@" \
    >"$work/$name.out" 2>"$work/$name.err" || { cat "$work/$name.err" >&2; fail "$name: export failed"; }
  cat "$work/$name.out" "$work/$name.err"
  "$python" "$check_perfetto" "$work/$name.pftrace" >"$work/$name.check" ||
    { cat "$work/$name.check" >&2; fail "$name: check_perfetto.py found errors"; }
  "$python" "$check_perfetto" --summary "$work/$name.pftrace" >"$work/$name.perfetto-summary" || true
  "$python" "$check_json" --summary "$work/$name.json" >"$work/$name.json-summary" ||
    { "$python" "$check_json" "$work/$name.json" >&2 || true; fail "$name: check_chrome_json.py found errors"; }
  "$python" - "$work/$name.out" "$work/$name.perfetto-summary" "$work/$name.json-summary" "$name" <<'PY'
import json, re, sys
out, perfetto, chrome, name = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4]
def wrote(fmt):
    line = next(l for l in out.splitlines() if f"({fmt}):" in l)
    keys = ["processes", "thread tracks", "other tracks", "counter tracks", "slices", "instants",
            "counter samples", "flows"]
    return {k: int(re.search(rf"(\d+) {k}\b", line).group(1)) for k in keys}
p, j = wrote("perfetto"), wrote("chrome-json")
expected = {"process_tracks": p["processes"], "thread_tracks": p["thread tracks"],
            "other_tracks": p["other tracks"], "counter_tracks": p["counter tracks"], "slices": p["slices"],
            "instants": p["instants"], "counters": p["counter samples"], "flows": p["flows"],
            "errors": 0, "warnings": 0, "sequences": p["processes"]}
for key, value in expected.items():
    assert perfetto[key] == value, f"{name}: perfetto {key}: checker {perfetto[key]}, exporter {value}"
assert len(perfetto["per_process"]) == p["processes"], perfetto["per_process"]
expected = {"processes": j["processes"], "threads": j["thread tracks"] + j["other tracks"],
            "slices": j["slices"], "instants": j["instants"], "counters": j["counter samples"],
            "counter_tracks": j["counter tracks"], "flows": j["flows"], "errors": 0}
for key, value in expected.items():
    assert chrome[key] == value, f"{name}: chrome {key}: checker {chrome[key]}, exporter {value}"
assert p == j, f"{name}: the formats differ: {p} {j}"
print(f"{name}: counts agree: {p}")
PY
}

# count NAME KEY: a count from the exporter's Perfetto line.
count() { grep -oE "[0-9]+ $2" <(grep "(perfetto):" "$work/$1.out") | head -1 | cut -d' ' -f1; }

# --- the hand-made job: every kind of track, launches, NCCL, overlapping operations
"$make_fixture" "$work/fixture"
"$rankscope" merge "$work/fixture" -o "$work/fixture.h5" >/dev/null
export_and_check "$work/fixture.h5" full
[ "$(count full processes)" = 3 ] || fail "fixture: processes"
[ "$(count full flows)" = 68 ] || fail "fixture: 32 collective and 36 launch flows expected"
[ "$(count full 'other tracks')" = 27 ] || fail "fixture: overlapping operations need their lanes"
grep -q "process_name.*rank 0 (host-a)" "$work/full.json" || fail "processes are named 'rank R (host)'"
grep -q '"pid":3,' "$work/full.json" || fail "rank 2 is pid 3 (its real pid 4242 repeats across hosts)"

export_and_check "$work/fixture.h5" ranks --ranks 0,2
[ "$(count ranks processes)" = 2 ] || fail "--ranks 0,2: processes"
[ "$(count ranks flows)" = 40 ] || fail "--ranks 0,2: 16 collective and 24 launch flows expected"

export_and_check "$work/fixture.h5" steps --steps 1:2
[ "$(count steps slices)" = $((17 * 3 * 2)) ] || fail "--steps 1:2: slices of two steps expected"
grep -q "window 1100000 to 1299000 ns" "$work/steps.out" || fail "--steps 1:2: window"

export_and_check "$work/fixture.h5" time --time +150us:+250us
grep -q "window 1150000 to 1250000 ns" "$work/time.out" || fail "--time +150us:+250us: window"
export_and_check "$work/fixture.h5" time_ns --time 1150000:1250000 --ranks 1
[ "$(count time_ns processes)" = 1 ] || fail "--time with --ranks"

# --warn-size-mb 0 never warns.
"$rankscope" export "$work/fixture.h5" --chrome "$work/warn.json" --warn-size-mb 0 >/dev/null 2>"$work/warn.err"
[ ! -s "$work/warn.err" ] || fail "--warn-size-mb 0 warned: $(cat "$work/warn.err")"

# Errors name the file; bad selections are refused.
set +e
msg=$("$rankscope" export "$work/fixture.h5" --perfetto "$work/x.pftrace" --ranks 7 2>&1); status=$?
[ $status -eq 1 ] && grep -q "fixture.h5: rank 7 is not in the job" <<<"$msg" || fail "--ranks 7: $status $msg"
msg=$("$rankscope" export "$work/fixture.h5" --perfetto "$work/x.pftrace" --steps 9 2>&1); status=$?
[ $status -eq 1 ] && grep -q "no ProfilerStep#N range with N in 9:9" <<<"$msg" || fail "--steps 9: $status $msg"
msg=$("$rankscope" export "$work/fixture.h5" --perfetto "$work/x.pftrace" --steps 1:1 --time +0s:+1us 2>&1); status=$?
[ $status -eq 1 ] && grep -q "\-\-steps 1:1 (1100000 to 1199000 ns) and --time (1000000 to 1001000 ns) do not overlap" <<<"$msg" ||
  fail "--steps and --time apart: $status $msg"
msg=$("$rankscope" export "$work/fixture.h5" --perfetto "$work/x.pftrace" --time 5-6 2>&1); status=$?
[ $status -eq 2 ] && grep -q "is not START:END" <<<"$msg" || fail "--time 5-6: $status $msg"
msg=$("$rankscope" export "$work/fixture.h5" 2>&1); status=$?
[ $status -ne 0 ] && grep -q -- "--perfetto" <<<"$msg" || fail "export without an output: $status $msg"
msg=$("$rankscope" export "$work/absent.h5" --perfetto "$work/x.pftrace" 2>&1); status=$?
[ $status -eq 1 ] && grep -q "absent.h5" <<<"$msg" || fail "missing timeline: $status $msg"
set -e
[ ! -e "$work/x.pftrace" ] || fail "a failed export left its output"

# --- a synthetic job: 4 ranks, every one in every allreduce, point-to-point messages
"$make_shards" "$work/synthetic" 4 20000 --shared-collectives 1 --messages 1 --skewed 1 >/dev/null
"$rankscope" merge "$work/synthetic" -o "$work/synthetic.h5" >/dev/null
export_and_check "$work/synthetic.h5" synthetic
# The size warning, with selections to try that fit: fewer ranks, or a window as long as 80 % of the limit's share;
# where not one rank fits, the window alone.
"$rankscope" export "$work/synthetic.h5" --chrome "$work/warn8.json" --warn-size-mb 8 >/dev/null 2>"$work/warn.err"
grep -qE "warning: the chrome-json output would be about [0-9.]+ MB, over the 8.0 MB warned at \(--warn-size-mb; a browser loads about 1 GB\); select less, e.g. --ranks 0 \(1 of 4 ranks\) or --time \+0.000000s:\+0.0[0-9]{5}s, or open it with" \
  "$work/warn.err" || fail "no size warning with a selection: $(cat "$work/warn.err")"
"$rankscope" export "$work/synthetic.h5" --chrome "$work/warn2.json" --warn-size-mb 2 >/dev/null 2>"$work/warn.err"
grep -qE "select less, e.g. --time \+0.000000s:\+0.00[0-9]{4}s, or open it with" "$work/warn.err" &&
  ! grep -q -- "--ranks" "$work/warn.err" || fail "a rank that does not fit was suggested: $(cat "$work/warn.err")"
export_and_check "$work/synthetic.h5" synthetic_part --ranks 1-2 --time +20us:+2ms

# --- a real profile: ddp_sim under mpiexec, steps marked with NVTX
if [ -n "$ddp_sim" ]; then
  (cd "$work" && "$mpiexec" -n 4 "$rankscope" run -o "$work/ddp.h5" -- "$ddp_sim" --steps 3 --compute sleep >/dev/null)
  export_and_check "$work/ddp.h5" ddp
  export_and_check "$work/ddp.h5" ddp_step --steps 3 --ranks 0-1
  [ "$(count ddp_step processes)" = 2 ] || fail "ddp_sim step 3 of ranks 0-1"
  [ "$(count ddp_step flows)" -gt 0 ] || fail "ddp_sim: its allreduces must be linked"
  [ "$(count ddp 'other tracks')" -gt 4 ] || fail "ddp_sim: nonblocking allreduces in flight need lanes"

  # --critical-path: the report's path, stretch for stretch, on a track of
  # each rank it crosses, a flow at each hop between ranks; with part of
  # the ranks, flows only where both ends are written (the checkers warn of
  # a flow on one event). A pipeline's path crosses ranks in every step,
  # whatever the load: stage 0 waits for its first gradient to come back
  # through the others, and every other stage for its first input. (A DDP
  # step's path may stay on one rank: on the rank that ends the step last,
  # where that is the rank all others waited for.)
  (cd "$work" && "$mpiexec" -n 4 "$rankscope" run -o "$work/pipeline.h5" -- "$pipeline" 4 4 1000 -1 1 8 >/dev/null)
  "$rankscope" report "$work/pipeline.h5" --format json -o "$work/pipeline-report.json" 2>/dev/null
  export_and_check "$work/pipeline.h5" path --critical-path
  export_and_check "$work/pipeline.h5" path_part --critical-path --ranks 0,1
  "$python" - "$work/pipeline-report.json" "$work/path.json" "$work/path.out" "$work/path_part.json" <<'PY'
import json, re, sys
from decimal import Decimal
report = json.load(open(sys.argv[1]))["critical_path"]
assert report is not None, "the report walked no path"
trace = json.load(open(sys.argv[2]), parse_float=Decimal)["traceEvents"]
out = open(sys.argv[3]).read()
segments = [seg for step in report["steps"] for seg in step["segments"]]
hops = sum(step["hops"] for step in report["steps"])
assert report["steps"] and all(step["hops"] > 0 for step in report["steps"]), "a pipeline's path crosses ranks in every step"
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name"}
drawn = [e for e in trace if e["ph"] == "X" and e.get("cat") == "critical path"]
assert all(names[(e["pid"], e["tid"])] == "critical path" for e in drawn), "stretches off the path's tracks"
assert len(drawn) == len(segments), f"{len(drawn)} stretches drawn, the report has {len(segments)}"
assert f"the critical path in {len(segments)} slices" in out, out
assert re.search(rf"\b{hops} critical path\)", out), f"{hops} hops, not the flows printed: {out}"
drawn_ns = sum(int(e["dur"] * 1000) for e in drawn)
path_ns = sum(seg["end_ns"] - seg["begin_ns"] for seg in segments)
assert drawn_ns == path_ns, f"drawn {drawn_ns} ns, the report's path {path_ns} ns"
spans = sorted((seg["rank"] + 1, seg["begin_ns"], seg["end_ns"]) for seg in segments)
got = sorted((e["pid"], int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000)) for e in drawn)
assert spans == got, "the stretches are not the report's segments"
flows = [e for e in trace if e["ph"] in "sf" and e.get("cat") == "critical path"]
ends = {}
for e in flows: ends.setdefault(e["id"], {})[e["ph"]] = e
assert len(ends) == hops and all(len(v) == 2 and v["s"]["pid"] != v["f"]["pid"] for v in ends.values())
part = json.load(open(sys.argv[4]), parse_float=Decimal)["traceEvents"]
assert {e["pid"] for e in part if e.get("cat") == "critical path"} <= {1, 2}
# A flow for each of the report's hops between the two ranks written, each whole.
hops_written = sum(1 for step in report["steps"] for a, b in zip(step["segments"], step["segments"][1:])
                   if a["rank"] != b["rank"] and {a["rank"], b["rank"]} <= {0, 1})
part_ends = {}
for e in part:
    if e["ph"] in "sf" and e.get("cat") == "critical path": part_ends.setdefault(e["id"], {})[e["ph"]] = e
assert len(part_ends) == hops_written and all(len(v) == 2 for v in part_ends.values()), (hops_written, part_ends)
print(f"critical path: {len(drawn)} stretches, {hops} hops, {path_ns} ns, as the report")
PY
  "$rankscope" export "$work/pipeline.h5" --kineto "$work/k" --critical-path >/dev/null 2>"$work/cp.err" &&
    fail "--critical-path without a Perfetto or Chrome output was taken"
  grep -q -- "--critical-path is drawn in --perfetto and --chrome outputs" "$work/cp.err" ||
    fail "--critical-path alone: $(cat "$work/cp.err")"
  "$rankscope" export "$work/synthetic.h5" --perfetto "$work/nopath.pftrace" --critical-path >/dev/null \
    2>"$work/nopath.err" || fail "--critical-path on a job without steps failed"
  grep -q "warning: no critical path drawn: " "$work/nopath.err" || fail "no path, not said: $(cat "$work/nopath.err")"
fi
echo "export CLI: all checks passed"
