#!/usr/bin/env bash
# Capture windows by step and by range, on ddp_sim (12 steps named
# ProfilerStep#0..11 in its NVTX domain "ddp_sim"): --steps 3:5 gives a
# report of exactly steps 3, 4 and 5 from a timeline far smaller than the
# whole job's; --steps :2 keeps the start to step 2 as one window;
# --steps 1:2/5 repeats the window (1, 2, 6, 7, 11);
# --capture-range nvtx:ProfilerStep#4@ddp_sim gives step 4 alone;
# --capture-range nvtx:backward records each backward pass, and the report
# takes each window for a step, with the whole job's buckets; --ring 0.5
# cuts the step its window began inside, which the report leaves out; a range
# in a domain the job never uses opens no window and says so; bad forms
# and combinations are refused; and on nvtx_app, a name per step,
# --steps 69000:69002 past the 65,536 names the agent's string table first
# holds, and --steps 99999 of a ddp_sim that registers its 100,000 step
# names at once. Without NVTX capture (NVTX_APP=none) only the refusals are checked.
# Usage: test_step_windows.sh RANKSCOPE DDP_SIM MPIEXEC NVTX_APP|none
set -euo pipefail
rankscope=$1 ddp_sim=$2 mpiexec=$3 nvtx_app=$4
. "$(dirname "$0")/../support/job_script.sh"
export OMPI_MCA_mpi_yield_when_idle=1
job_args=(--steps 12 --warmup-steps 0 --layers 6 --layer-mb 1 --forward-us 100 --optimizer-us 300)

# refused OPTIONS... -- MESSAGE: rankscope run refuses OPTIONS with status 2 and MESSAGE.
refused() {
  local options=() status=0
  while [ "$1" != -- ]; do options+=("$1"); shift; done
  "$rankscope" run "${options[@]}" -- true >bad.log 2>&1 || status=$?
  [ "$status" -eq 2 ] && grep -qF -- "$2" bad.log || { cat bad.log; fail "${options[*]}: not refused with '$2' (status $status)"; }
}

echo "== refusals"
for bad in 5:3 x 1:10/10 1:2/0 3:5/ -1 1:2:3 99999999999999999999; do
  refused --steps "$bad" -- "is not A:B, A, A:, :B or A:B/PERIOD"
done
refused --steps 3:5 --delay 1 -- "--delay excludes --steps"
refused --steps 3:5 --paused -- "--paused excludes --steps"
refused --capture-range nvtx: -- "is neither nvtx:NAME"
refused --capture-range cuda:x -- "is neither nvtx:NAME"
refused --capture-range nvtx:a --steps 1:2 -- "--steps excludes --capture-range"
refused --steps 1:2 --capture mpi -- "--steps needs nvtx or python in --capture (it is mpi)"
refused --capture-range nvtx:a --capture mpi -- "--capture-range needs nvtx in --capture (it is mpi)"
refused --capture-range cudaProfilerApi --capture mpi,nvtx -- "--capture-range needs cuda in --capture (it is mpi,nvtx)"
status=0
"$rankscope" export --steps 1:2/5 nothing.h5 >bad.log 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -qF "'1:2/5' is not A:B, A, A: or :B" bad.log || { cat bad.log; fail "export took a period"; }
if [ "$nvtx_app" = none ]; then
  echo "no NVTX capture in this build: windows by step not run"
  exit 0
fi

# profile NAME OPTIONS...: profile ddp_sim on 2 ranks into NAME.h5 and report it as NAME.json.
profile() {
  local name=$1
  shift
  "$mpiexec" -n 2 "$rankscope" run -o "$work/$name.h5" "$@" -- "$ddp_sim" "${job_args[@]}" >"$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: the run failed"; }
  "$rankscope" info --check --json "$name.h5" >"$name-info.json" || fail "$name: info --check refused the timeline"
}

# check NAME STEPS [CONDITIONS...]: the report of NAME lists exactly STEPS
# (a Python list), none cut by its windows (but with STEPS_CUT_ALLOWED set,
# where those cut are said), every rank holds that many ProfilerStep ranges,
# and each rank's counters meet the conditions.
check() {
  "$rankscope" report --format json "$1.h5" >"$1.json" || fail "$1: report failed"
  /usr/bin/python3 - "$@" <<'PY'
import json, os, sys
name, steps, conditions = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
report = json.load(open(name + ".json"))
info = json.load(open(name + "-info.json"))
cut = [c["step"] for c in report["steps"]["cut"]]
assert sorted(report["steps"]["numbers"] + cut) == steps, (name, report["steps"]["numbers"], cut, steps)
# Steps of one thread lie whole in their windows; two threads that each run steps cut each other's windows.
assert not cut or os.environ.get("STEPS_CUT_ALLOWED"), (name, report["steps"]["cut"])
for rank in info["ranks"]:
    c = rank["counters"]
    assert c.get("events_dropped", 0) == 0, (rank["rank"], c)
    for condition in conditions:
        counter, op, value = condition.split()
        assert eval(f"{c.get(counter, 0)} {op} {value}"), (name, rank["rank"], condition, c.get(counter))
print(f"{name}: steps {steps}, {sum(r['events'] for r in info['ranks'])} events")
PY
}

# events NAME: the events NAME's timeline holds, all ranks together.
events() { /usr/bin/python3 -c "import json,sys; print(sum(r['events'] for r in json.load(open(sys.argv[1]))['ranks']))" "$1-info.json"; }

echo "== the whole job"
profile whole
check whole "$(seq -s, 0 11 | sed 's/.*/[&]/')" "capture_windows == 0" "events_outside_window == 0"

echo "== --steps 3:5"
profile three --steps 3:5
grep -q "rank 0: --steps 3:5: 1 capture window recorded, [1-9][0-9]* events outside counted on this rank" three.log || { cat three.log; fail "no word of the window"; }
check three "[3, 4, 5]" "capture_windows == 1" "events_outside_window > 0"
[ $(( $(events three) * 3 )) -lt "$(events whole)" ] || fail "3 steps of 12 kept $(events three) of $(events whole) events"

echo "== --steps :2"
profile opening --steps :2
check opening "[0, 1, 2]" "capture_windows == 1" "events_outside_window > 0"

echo "== --steps 1:2/5"
profile repeated --steps 1:2/5
check repeated "[1, 2, 6, 7, 11]" "capture_windows == 3" "events_outside_window > 0"

echo "== --capture-range nvtx:ProfilerStep#4@ddp_sim"
profile ranged --capture-range 'nvtx:ProfilerStep#4@ddp_sim'
check ranged "[4]" "capture_windows == 1" "events_outside_window > 0"

echo "== --capture-range nvtx:backward: each backward pass a window, and each window a step"
profile backward --capture-range 'nvtx:backward'
check backward "$(seq -s, 1 12 | sed 's/.*/[&]/')" "capture_windows == 12" "events_outside_window > 0"
/usr/bin/python3 - <<'PY' || fail "backward: the windows were not taken for steps"
import h5py, json
whole, backward = json.load(open("whole.json")), json.load(open("backward.json"))
assert backward["steps"]["are_capture_windows"] and not whole["steps"]["are_capture_windows"]
# Each step is its window, the backward range itself: the time between windows is in none.
with h5py.File("backward.h5", "r") as f:
    strings = f["strings/bytes"][()].tobytes()
    offsets = f["strings/offsets"][()]
    name = {strings[offsets[i]:offsets[i + 1]].decode(): i for i in range(len(offsets) - 1)}
    events, rows = f["events"][()], f["ranks"][()]
for rank in backward["ranks"]:
    row = rows[rank["rank"]]
    mine = events[row["event_offset"]:row["event_offset"] + row["event_count"]]
    mine = sorted(int(e["end_ns"]) - int(e["begin_ns"]) for e in mine if e["name_id"] == name["backward"])
    steps = sorted(s["duration_ns"] for s in rank["steps"])
    assert steps == mine, (rank["rank"], steps, mine)
# The same gradient buckets as the whole job's, not those of every window together.
buckets = lambda report: len(report["buckets"]["buckets"])
assert buckets(backward) == buckets(whole) > 0, (buckets(backward), buckets(whole))
print("backward:", backward["steps"]["mean_step_ns"], "ns a window,", buckets(backward), "buckets as in the whole job")
PY

echo "== --ring 0.5 on steps of about 0.2 s: the step the recorder's window began inside is cut, not compute"
"$mpiexec" -n 2 "$rankscope" run -o "$work/ringed.h5" --ring 0.5 -- "$ddp_sim" --steps 12 --warmup-steps 0 --layers 6 \
  --layer-mb 1 --forward-us 10000 --optimizer-us 300 >ringed.log 2>&1 || { cat ringed.log; fail "ringed: the run failed"; }
"$rankscope" report --format json ringed.h5 >ringed.json || fail "ringed: report failed"
/usr/bin/python3 - <<'PY' || fail "ringed: a step the flight recorder cut was reported"
import json
report = json.load(open("ringed.json"))
steps = report["steps"]
assert not steps["are_capture_windows"] and steps["windowed_ranks"] == [0, 1], steps
assert len(steps["cut"]) >= 1 and all(cut["ranks"] == [0, 1] for cut in steps["cut"]), steps
assert max(cut["step"] for cut in steps["cut"]) < min(steps["numbers"]), steps
# Every step reported is whole: none is the window's stub, all alike.
durations = [s["duration_ns"] for rank in report["ranks"] for s in rank["steps"]]
assert durations and max(durations) < 1.5 * min(durations), durations
print("ringed: steps", steps["numbers"], "reported, step", [c["step"] for c in steps["cut"]], "cut on both ranks")
PY

echo "== --capture-range in a domain the job does not use"
profile elsewhere --capture-range 'nvtx:ProfilerStep#4@other'
grep -q "rank 0: --capture-range nvtx:ProfilerStep#4@other: no capture window opened, so no event was recorded" elsewhere.log ||
  { cat elsewhere.log; fail "an empty window went unsaid"; }
echo "== --steps 69000:69002 of a job that names each step (the string table grows)"
"$mpiexec" -n 1 "$rankscope" run -o "$work/long.h5" --steps 69000:69002 -- "$nvtx_app" 70000 2 numbered >long.log 2>&1 ||
  { cat long.log; fail "long: the run failed"; }
"$rankscope" info --check --json long.h5 >long-info.json || fail "long: info --check refused the timeline"
# Its two threads cut windows of their own: a step one thread ran while the other's closed the window is cut.
STEPS_CUT_ALLOWED=1 check long "[69000, 69001, 69002]" "capture_windows >= 1" "names_dropped == 0"
echo "== --steps 99999 of a job that registers its 100,000 step names up front (a burst the writer thread does not wait for)"
"$mpiexec" -n 1 "$rankscope" run -o "$work/burst.h5" --steps 99999:99999 -- "$ddp_sim" --steps 100000 --warmup-steps 0 \
  --layers 1 --layer-mb 0.001 --forward-us 0 --optimizer-us 0 --progress-us 0 >burst.log 2>&1 ||
  { cat burst.log; fail "burst: the run failed"; }
"$rankscope" info --check --json burst.h5 >burst-info.json || fail "burst: info --check refused the timeline"
check burst "[99999]" "capture_windows == 1" "names_dropped == 0"
echo "step windows ok"
