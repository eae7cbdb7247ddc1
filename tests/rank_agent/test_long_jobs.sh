#!/usr/bin/env bash
# Long jobs: capture windows, triggers and the flight recorder, on a steady
# job (ring_app: an allreduce and a broadcast every 20 ms). --delay 2
# --duration 2 keeps 2 s of it and counts the rest; --paused with
# `rankscope trigger` start, then stop 3 s later, keeps those 3 s on every
# rank alike; --ring 2 keeps only the last 2 s, the rest counted as aged
# out on every rank; SIGUSR2 to mpirun midway, or `rankscope trigger dump`,
# writes a window then too; a hang writes the window with the state the
# hang report needs; a rank stopped by SIGSTOP is said to be so by its run,
# missing by the others' hang, and frozen by its end; bad values, --paused
# with --delay, and a trigger for no
# running job are refused.
# Usage: test_long_jobs.sh RANKSCOPE RING_APP HANG_APP MPIEXEC
set -euo pipefail
rankscope=$1 ring_app=$2 hang_app=$3 mpiexec=$4
. "$(dirname "$0")/../support/job_script.sh"
export OMPI_MCA_mpi_yield_when_idle=1

# check NAME SECONDS RANK_COUNTERS...: the collectives kept span SECONDS
# (± 0.5 s) of the job's, as many on every rank (± 2 a window: each of its
# two edges may fall between one rank's collective and the next, the ranks
# cutting at one instant as each sees it), and each rank's
# counters hold (e.g. "ring_dumps == 1", "events_outside_window > 0"); the
# capture windows each rank's timeline records span SECONDS too (± 0.5 s),
# as many as the counters say (a ring's dumps, or the windows opened), and
# the report takes each window for a step (ring_app marks no steps).
check() {
  "$rankscope" info --check --json "$1.h5" >"$1-info.json" || fail "$1: info --check refused the timeline"
  "$rankscope" report --format json "$1.h5" >"$1-report.json" || fail "$1: report refused the timeline"
  "$rankscope" info "$1.h5" >"$1-info.txt" || fail "$1: info refused the timeline"
  grep -q "^  ranks 0-2: [0-9]* windows\?, [0-9.]* [mµn]\?s\( to [0-9.]* [mµn]\?s\)\? in all$" "$1-info.txt" || { cat "$1-info.txt"; fail "$1: info lists no windows"; }
  /usr/bin/python3 - "$@" <<'PY'
import json, re, sys
name, seconds, conditions = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
info = json.load(open(name + "-info.json"))
made = int(re.search(r"ring_app: (\d+) allreduces in ([0-9.]+) s", open(name + ".log").read()).group(1))
per_second = 2 * made / float(re.search(r"allreduces in ([0-9.]+) s", open(name + ".log").read()).group(1))
kept = info["events_by_kind"]["mpi_collective"]
ranks = info["world_size"]
per_rank = [rank["events"] for rank in info["ranks"]]
print(f"{name}: {made} iterations made, {kept} collectives kept on {ranks} ranks "
      f"({kept / ranks / per_second:.2f} s of {per_second:.0f}/s per rank; events per rank {per_rank})")
assert (seconds - 0.5) * per_second * ranks <= kept <= (seconds + 0.5) * per_second * ranks, (kept, seconds)
windows = max([1] + [rank["counters"].get("ring_dumps", 0) for rank in info["ranks"]])
assert max(per_rank) - min(per_rank) <= 2 * windows, (per_rank, windows)
for rank in info["ranks"]:
    c = rank["counters"]
    assert c.get("events_dropped", 0) == 0, (rank["rank"], c)
    assert rank["capture_windowed"], (name, rank["rank"], "no capture windows recorded")
    spans = rank["capture_windows"]
    held = sum(s["until_ns"] - s["from_ns"] for s in spans) / 1e9
    assert abs(held - seconds) <= 0.5, (name, rank["rank"], spans, held, seconds)
    assert len(spans) == c.get("ring_dumps", c.get("capture_windows")), (name, rank["rank"], spans, c)
    for condition in conditions:
        counter, op, value = condition.split()
        assert eval(f"{c.get(counter, 0)} {op} {value}"), (rank["rank"], condition, c.get(counter))
report = json.load(open(name + "-report.json"))
assert report["steps"]["are_capture_windows"], report["steps"]
most = max(len(rank["capture_windows"]) for rank in info["ranks"])
assert report["steps"]["numbers"] == list(range(1, most + 1)), (report["steps"], most)
PY
}

echo "== --delay 2 --duration 2 on a 6 s job"
"$mpiexec" -n 3 "$rankscope" run -o "$work/timed.h5" --delay 2 --duration 2 -- "$ring_app" 6 20 >timed.log 2>&1 ||
  { cat timed.log; fail "the run failed"; }
grep -q "rank 0: capture started (--delay)" timed.log && grep -q "rank 0: capture paused (--duration)" timed.log ||
  { cat timed.log; fail "no word of the window"; }
check timed 2 "events_outside_window > 0" "capture_windows == 1"

echo "== --paused, then rankscope trigger start, and stop some 3 s later; the running job's shards held"
"$mpiexec" -n 3 "$rankscope" run -o "$work/triggered.h5" --paused -- "$ring_app" 9 20 >triggered.log 2>&1 &
job=$!
sleep 2
"$rankscope" trigger "$work/triggered.h5" start >start.txt || fail "trigger start failed"
grep -q "^rankscope trigger: start at [0-9:.]* UTC on every rank of $work/triggered.h5.shards (trigger 1)$" start.txt ||
  { cat start.txt; fail "trigger start said"; }
# The job's shards are held by its ranks: neither merged nor written over meanwhile.
status=0
"$rankscope" merge "$work/triggered.h5.shards" -o "$work/early.h5" >early.txt 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "rank-00000.shard is being written by a running process" early.txt ||
  { cat early.txt; fail "a running job's shards were merged"; }
status=0
"$mpiexec" -n 1 "$rankscope" run -o "$work/triggered.h5" -- "$ring_app" 1 20 >second.txt 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q "a job still running writes its shards there" second.txt ||
  { cat second.txt; fail "a second run into a running job's -o was not refused as such"; }
sleep 1
"$rankscope" trigger "$work/triggered.h5.shards" stop >stop.txt || fail "trigger stop failed"
grep -q "(trigger 2)$" stop.txt || { cat stop.txt; fail "the second trigger is not numbered 2"; }
cp "$work/triggered.h5.shards/control" triggered-control
wait "$job" || { cat triggered.log; fail "the triggered run failed"; }
# The triggers' file goes with the shards: a trigger for the ended job finds none.
[ ! -e "$work/triggered.h5.shards" ] || fail "the triggered job left its shard folder: $(ls "$work/triggered.h5.shards")"
job=
# The window, from the triggers' own instants (the checks above take a varying time).
seconds=$(/usr/bin/python3 -c '
import sys
at = [int(line.split()[2]) for line in open(sys.argv[1])]
print((at[1] - at[0]) / 1e9)' triggered-control)
check triggered "$seconds" "events_outside_window > 0" "capture_windows == 1"
status=0
"$rankscope" trigger "$work/none.h5" start >none.txt 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "no running job writes $work/none.h5.shards" none.txt || { cat none.txt; fail "a trigger for no job"; }
"$rankscope" trigger "$work/none.h5" pause >none.txt 2>&1 && fail "trigger pause was taken"

echo "== triggers sent a quarter of a second apart: every window kept"
# start, stop, start, stop within a second, between two of a rank's reads
# of the control file: each rank takes all four, in order (before, only
# the last was seen, and nothing was captured).
"$mpiexec" -n 3 "$rankscope" run -o "$work/quick.h5" --paused -- "$ring_app" 8 20 >quick.log 2>&1 &
job=$!
sleep 2
for action in start stop start stop; do
  "$rankscope" trigger "$work/quick.h5" "$action" >>quick-triggers.txt || fail "trigger $action failed"
  sleep 0.25
done
cp "$work/quick.h5.shards/control" quick-control
wait "$job" || { cat quick.log; fail "the quickly triggered run failed"; }
job=
[ "$(grep -c "rank 0: capture started (rankscope trigger [13])" quick.log)" -eq 2 ] &&
  [ "$(grep -c "rank 0: capture paused (rankscope trigger [24])" quick.log)" -eq 2 ] ||
  { cat quick.log quick-control; fail "not every trigger was carried out"; }
seconds=$(/usr/bin/python3 -c '
import sys
at = [int(line.split()[2]) for line in open(sys.argv[1])]
print((at[1] - at[0] + at[3] - at[2]) / 1e9)' quick-control)
check quick "$seconds" "events_outside_window > 0" "capture_windows == 2"

echo "== --ring 2 on a 6 s job: the last 2 s"
"$mpiexec" -n 3 "$rankscope" run -o "$work/tail.h5" --ring 2 -- "$ring_app" 6 20 >tail.log 2>&1 || { cat tail.log; fail "the run failed"; }
check tail 2 "ring_dumps == 1" "ring_events_aged_out > 0" "ring_events_crowded_out == 0"
"$rankscope" report --format json tail.h5 >tail.json || fail "report on a ring's timeline failed"

echo "== SIGUSR2 to mpirun at 3 s: that window too"
"$mpiexec" -n 3 "$rankscope" run -o "$work/signal.h5" --ring 1 -- "$ring_app" 6 20 >signal.log 2>&1 &
job=$!
sleep 3
kill -USR2 "$job"
wait "$job" || { cat signal.log; fail "the run failed after SIGUSR2"; }
job=
grep -q "SIGUSR2: wrote the last 1.0 s of events (--ring)" signal.log || { cat signal.log; fail "no rank said it wrote its ring"; }
check signal 2 "ring_dumps == 2" "ring_events_aged_out > 0" "ring_events_crowded_out == 0"

echo "== rankscope trigger dump at 3.5 s: that window too"
"$mpiexec" -n 3 "$rankscope" run -o "$work/dumped.h5" --ring 1 -- "$ring_app" 6 20 >dumped.log 2>&1 &
job=$!
sleep 1.5
"$rankscope" trigger "$work/dumped.h5" dump >dump.txt || fail "trigger dump failed"
wait "$job" || { cat dumped.log; fail "the run failed after a dump trigger"; }
job=
[ "$(grep -c "rankscope trigger dump: wrote the last 1.0 s of events (--ring)" dumped.log)" -eq 3 ] ||
  { cat dumped.log; fail "not every rank said it wrote its ring"; }
check dumped 2 "ring_dumps == 2" "ring_events_aged_out > 0" "ring_events_crowded_out == 0"

echo "== a hang writes the window and the state"
status=0
timeout 120 "$mpiexec" -n 3 "$rankscope" run -o "$work/hang.h5" --ring 30 --hang-timeout 3 --hang-action abort -- \
  "$hang_app" 2 sleep 100 >hang.log 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat hang.log; fail "the hung job ended with status $status"; }
"$rankscope" merge "$work/hang.h5.shards" -o hang.h5 >/dev/null
"$rankscope" report hang.h5 --format json -o hang.json
/usr/bin/python3 - <<'PY'
import json
[h] = json.load(open("hang.json"))["hangs"]
assert (h["call"], h["seq"], h["missing_ranks"]) == ("MPI_Allreduce", 3, [2]), h
assert h["missing"][0]["last_call"] == "MPI_Barrier", h["missing"][0]
print("hang named from the ring's window:", h["call"], "#3, rank 2 missing, last call", h["missing"][0]["last_call"])
PY

echo "== a rank stopped by SIGSTOP: its run says so, the others' hang names it, and its end says it was frozen"
"$mpiexec" -n 3 "$rankscope" run -o "$work/frozen.h5" --hang-timeout 2 --hang-action abort -- "$ring_app" 30 20 \
  >frozen.log 2>&1 &
job=$!
frozen=
for _ in $(seq 100); do
  sleep 0.1
  for pid in $(pgrep -x "$(basename "$ring_app")" || true); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=2" && frozen=$pid
  done
  [ -n "$frozen" ] && break
done
[ -n "$frozen" ] || fail "rank 2's ring_app was not found"
sleep 1
kill -STOP "$frozen"
status=0
wait "$job" || status=$?
job=
[ "$status" -ne 0 ] || { cat frozen.log; fail "the job with a frozen rank ended with status 0"; }
grep -q "rankscope run: rank 2: the application was stopped by SIGSTOP (signal 19): it makes no progress" frozen.log ||
  { cat frozen.log; fail "the stop went unsaid"; }
"$rankscope" merge "$work/frozen.h5.shards" -o frozen.h5 >/dev/null
"$rankscope" info frozen.h5 >frozen.info
grep -q "rank 2: .*after SIGSTOP (signal 19) had stopped it for [0-9.]* [mµ]\?s in all: frozen meanwhile, not hung" frozen.info ||
  { cat frozen.log frozen.info; fail "info does not say rank 2 was frozen"; }
"$rankscope" report frozen.h5 --format json -o frozen.json
/usr/bin/python3 - <<'PY'
import json
report = json.load(open("frozen.json"))
# Continued by mpirun's SIGCONT before its SIGTERM, rank 2 may enter a collective or two the others left.
assert any(h["call"] == "MPI_Allreduce" and h["missing_ranks"] == [2] for h in report["hangs"]), report["hangs"]
[rank2] = [r for r in report["ranks"] if r["rank"] == 2]
# Stopped about a second before the others' 2 s hang timeout, and until the job was ended.
assert rank2["stopped"]["signal"] == 19 and rank2["stopped"]["ns"] > 1.5e9, rank2["stopped"]
assert all(r["stopped"] is None for r in report["ranks"] if r["rank"] != 2), report["ranks"]
print("frozen rank 2 named missing from MPI_Allreduce, stopped", rank2["stopped"]["ns"] / 1e9,
      "s, ended", rank2["status"])
PY

echo "== bad values"
for option in --ring --delay --duration; do
  for bad in -1 nan 1e6 two; do
    status=0
    "$rankscope" run "$option" "$bad" -- true >bad.log 2>&1 || status=$?
    [ "$status" -eq 2 ] && grep -q -- "$option" bad.log || { cat bad.log; fail "$option $bad was not refused (status $status)"; }
  done
done
status=0
"$rankscope" run --paused --delay 5 -- true >bad.log 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q -- "rankscope run: --delay excludes --paused" bad.log || { cat bad.log; fail "--paused with --delay was taken"; }
echo "long jobs ok"
